package nvml_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/nvml"
)

// Read the health of the GPU that CUDA calls device 0, then watch it for Xid errors
// for a moment.
func Example() {
	s, err := nvml.Open()
	if err != nil {
		fmt.Println("no NVML:", err) // errors.Is(err, nvml.ErrLibraryNotFound) without the driver
		return
	}
	defer s.Close()
	d, err := s.CUDADevice(cuda.Device(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	name, _ := d.Name()
	h, _ := d.Health()
	fmt.Printf("%s: GPU %d%%, memory %d of %d MiB used, %d °C, %.1f W\n", name,
		h.Utilization.GPU, h.Memory.Used>>20, h.Memory.Total>>20, h.Temperature.GPU, float64(h.Power.Usage)/1000)
	fmt.Printf("throttle reasons: %v; MIG enabled: %v\n", h.Throttle, h.MIG.Enabled)
	if err := h.Errs["ECC"]; errors.Is(err, nvml.ErrNotSupported) {
		fmt.Println("no ECC on this GPU")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	xids, err := d.XidEvents(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev := range xids { // closes when ctx is done
		fmt.Println(ev)
	}
}
