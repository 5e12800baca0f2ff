// Command gocudavet checks, before a program runs, that it uses gocuda's GPU objects
// the way their contracts say: every object closed, none used after its Close, raw
// addresses and handles kept within their owner's ordering, only capturable work in a
// stream capture, and read-only kernel arguments marked with cuda.In. See
// docs/vet.md for each check.
//
// Run it on its own, or as go vet's tool:
//
//	go run github.com/gocuda/gocuda/cmd/gocudavet ./...
//	go install github.com/gocuda/gocuda/cmd/gocudavet
//	go vet -vettool=$(go env GOPATH)/bin/gocudavet ./...
//
// Each check can be turned off by its flag (-capture=false); it exits with status 1
// (3 under go vet's protocol) when it reports anything.
package main

import (
	"golang.org/x/tools/go/analysis/multichecker"

	"github.com/gocuda/gocuda/vet"
)

// multichecker.Main also speaks go vet's protocol (-V=full, -flags and a .cfg
// file per package), so that one binary serves both ways of running it.
func main() { multichecker.Main(vet.Analyzers...) }
