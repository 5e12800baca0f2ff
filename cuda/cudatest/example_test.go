package cudatest_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// The body of a GPU test of your own. Its package's TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
//
// as this package's is, so that it runs on the strict fake driver where there is no
// GPU (CI) and on the GPU where there is one; a violation of the driver API fails
// the run. (In a test, cudatest.Stream(t) gives the context and a stream.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no driver:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	x, err := cuda.AllocFor[float32](s, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	if err := cuda.CopyToDeviceAsync(s, x, []float32{1, 2, 3, 4}); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 4)
	if err := cuda.CopyFromDevice(out, x); err != nil {
		fmt.Println(err)
		return
	}
	n, _ := cudatest.Violations() // the fake's count; 0 on a real driver
	fmt.Println(out, "violations:", n)
	// Output: [1 2 3 4] violations: 0
}
