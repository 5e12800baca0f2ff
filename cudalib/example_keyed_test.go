package cudalib_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudalib"
)

// fooPlans is a pool of foo handles made for a fill length, as cuFFT's plans are made
// for a transform (foo is the library of the package's Example): at most 4 idle ones
// per context, of all lengths together.
var fooPlans = cudalib.NewKeyedPool[int, fooHandle, *ownedFoo, struct{}](4,
	func(n int, h *fooHandle) error { return fooCreate(h) }, ownFoo, false)

// FillPlanned fills x with v on s with a handle made for x's length.
func FillPlanned(s *cuda.Stream, x *cuda.DeviceBuffer, v byte) error {
	return fooPlans.Run(s, x.Len(), fooSetStream, fillCall(x, v), cuda.Writes(x))
}

// Handles of a keyed pool serve the calls of their key: calls of two lengths in turn
// on one stream use two handles, one kept by the stream and the other in the
// context's cache.
func ExampleNewKeyedPool() {
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
	for _, n := range []int{8, 16, 8, 16} {
		x, err := cuda.AllocFor[byte](s, n)
		if err != nil {
			fmt.Println(err)
			return
		}
		err = FillPlanned(s, x, 1)
		x.Close() // after the fill: the hand-off holds x until it is queued
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("kept by the stream:", fooPlans.Kept(ctx), "idle in the context:", fooPlans.Idle(ctx))
	// Output: kept by the stream: 1 idle in the context: 1
}
