// Command gensymbols writes package cudatest's list of the CUDA 11.8 driver's entry
// points (zz_generated_driver118.go, for the fake driver's pose as that driver) from
// the CUDA 11.8 cuda.h, which is never copied into the repository: run it with
// go generate ./cuda/cudatest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/gocuda/gocuda/cuda/cudatest/internal/headersyms"
)

// The file's generator line, variable and comment; cudatest's TestDriver118Symbols
// checks the variable against the header.
const (
	generator = "go run ./internal/gensymbols"
	variable  = "driver118Symbols"
	doc       = "driver118Symbols are the entry points a program compiled against the CUDA 11.8 cuda.h looks up (headersyms.Symbols)."
)

func main() {
	header := flag.String("header", "", "the CUDA 11.8 cuda.h (default: $"+headersyms.EnvCUDA118+"/include/cuda.h, else ../shared/cuda-11.8 beside the module)")
	out := flag.String("o", "zz_generated_driver118.go", "the file to write")
	flag.Parse()
	if err := run(*header, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gensymbols:", err)
		os.Exit(1)
	}
}

func run(header, out string) error {
	if header == "" {
		var err error
		header, err = headersyms.Find118()
		if errors.Is(err, headersyms.ErrNoHeader) {
			// go generate ./... must not fail where the headers are not at hand: the
			// committed list stands, and its test checks it where they are.
			fmt.Fprintf(os.Stderr, "gensymbols: %s left as it is: %v\n", out, err)
			return nil
		}
		if err != nil {
			return err
		}
	}
	syms, err := headersyms.Symbols(header)
	if err != nil {
		return err
	}
	src, err := headersyms.GoSource("cudatest", variable, doc, generator, syms)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}
