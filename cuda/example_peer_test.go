package cuda_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
)

// Two GPUs: work on device 0, a copy to device 1 queued on device 1's stream (it
// waits on the device for device 0's work, never on the host), and peer access
// enabled once per pair where the devices support it, which makes the copy direct.
// (It needs two GPUs, so it is compiled but not run by go test.)
func Example_peer() {
	ctx0, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	ctx1, err := cuda.Device(1).Context()
	if err != nil {
		fmt.Println("no second GPU:", err)
		return
	}
	if ok, _ := ctx1.CanAccessPeer(ctx0); ok {
		if err := ctx1.EnablePeerAccess(ctx0); err != nil { // device 1 reads device 0's memory
			fmt.Println(err)
			return
		}
	}
	s0, _ := ctx0.NewStream()
	defer s0.Close()
	s1, _ := ctx1.NewStream()
	defer s1.Close()

	a, _ := cuda.AllocFor[float32](s0, 1<<20) // on device 0
	defer a.Close()
	b, _ := cuda.AllocFor[float32](s1, 1<<20) // on device 1
	defer b.Close()
	_ = a.Memset32Async(s0, 0x3f800000)              // 1.0, or a kernel on device 0
	if err := cuda.CopyAsync(s1, b, a); err != nil { // after the memset, on the device
		fmt.Println(err)
		return
	}
	out := make([]float32, 4)
	if err := cuda.CopyFromDevice(out, b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
}
