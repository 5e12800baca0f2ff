package cupti_test

import (
	"fmt"
	"os"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cupti"
)

// Record the GPU work of a few calls and write it as a trace that ui.perfetto.dev
// opens. (It needs a GPU and libcupti, so it is compiled but not run by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	tl, err := cupti.Start()
	if err != nil {
		fmt.Println("no timeline:", err) // without libcupti: set $GOCUDA_CUPTI_LIB
		return
	}
	x, err := cuda.AllocFrom(s, make([]float32, 1<<20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	if err := x.Memset32Async(s, 0); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Synchronize(); err != nil { // Stop reports completed work
		fmt.Println(err)
		return
	}
	tr, err := tl.Stop()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range tr.Activities {
		if a.Call != nil {
			fmt.Printf("%s %s %v on stream %d, queued at %s\n", a.Kind, a.Name, a.Duration(), a.Stream, a.Call.Site())
		}
	}
	f, err := os.Create("timeline.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	if err := tr.WriteChrome(f); err != nil {
		fmt.Println(err)
	}
}
