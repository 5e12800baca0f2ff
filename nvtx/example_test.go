package nvtx_test

import (
	"fmt"

	"github.com/gocuda/gocuda/nvtx"
)

// A step of a program as a range in Nsight's timeline, in one line; it shows under a
// profiler (nsys profile, ncu --nvtx) and costs one atomic load without one.
func Example() {
	step := func(i int) {
		defer nvtx.NewDomain("training").Start("step", nvtx.Color(0xff76b900), nvtx.Payload(int64(i))).End()
		// ... the step's GPU work ...
	}
	for i := range 3 {
		step(i)
	}
	fmt.Println("done")
	// Output: done
}
