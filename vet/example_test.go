package vet_test

import (
	"fmt"

	"github.com/gocuda/gocuda/vet"
)

// The checks that gocudavet runs, each also a flag of the command (-close=false
// turns one off). A program of one's own runs them with multichecker.Main, or picks
// some: singlechecker.Main(vet.Capture).
func Example() {
	for _, a := range vet.Analyzers {
		fmt.Printf("%-13s %s\n", a.Name, a.Doc)
	}
	// Output:
	// close         report gocuda objects that are not closed on every path (nor returned, stored or handed over)
	// useafterclose report uses of a gocuda object on a path after its Close
	// rawaddr       report raw device addresses and handles that outlive their owner or the ordering of cuda.Enqueue
	// capture       report calls in a stream capture that cannot be captured (synchronization, host waits, synchronous copies)
	// readonly      report buffers passed to a const T* kernel parameter (of NVRTC source compiled in the function) without cuda.In
}
