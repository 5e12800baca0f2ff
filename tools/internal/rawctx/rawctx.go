// Package rawctx opens device 0 through gocuda's raw layer, as a C program does, for
// the tools that measure the driver beside C (tools/bench, tools/blockprobe).
package rawctx

import (
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Device is device 0 with its primary context and a loaded module.
type Device struct {
	Dev cudaraw.CUdevice
	Ctx cudaraw.CUcontext
	Mod cudaraw.CUmodule
}

// CString returns s as a NUL-terminated byte slice.
func CString(s string) []byte { return append([]byte(s), 0) }

// Open initializes the driver, retains device 0's primary context, makes it current
// on the calling thread (lock the thread first) and loads the PTX module ptx. An
// error names the driver call that failed.
//
// Out-parameters are locals: cgo checks the whole object an unsafe.Pointer argument
// points into.
func Open(ptx string) (Device, error) {
	var (
		dev cudaraw.CUdevice
		ctx cudaraw.CUcontext
		mod cudaraw.CUmodule
	)
	img := CString(ptx)
	err := Run(
		Step{"cuInit", func() error { return cudaraw.Init(0) }},
		Step{"cuDeviceGet", func() error { return cudaraw.DeviceGet(&dev, 0) }},
		Step{"cuDevicePrimaryCtxRetain", func() error { return cudaraw.DevicePrimaryCtxRetain(&ctx, dev) }},
		Step{"cuCtxSetCurrent", func() error { return cudaraw.CtxSetCurrent(ctx) }},
		Step{"cuModuleLoadData", func() error { return cudaraw.ModuleLoadData(&mod, unsafe.Pointer(&img[0])) }},
	)
	return Device{Dev: dev, Ctx: ctx, Mod: mod}, err
}

// Function looks up the kernel name in the module.
func (d Device) Function(name string) (cudaraw.CUfunction, error) {
	var f cudaraw.CUfunction
	if err := cudaraw.ModuleGetFunction(&f, d.Mod, &CString(name)[0]); err != nil {
		return 0, fmt.Errorf("cuModuleGetFunction(%s): %w", name, err)
	}
	return f, nil
}

// Step is one driver call of a setup sequence, named for errors.
type Step struct {
	What string
	Do   func() error
}

// Run runs the steps in order and stops at the first failure, which it returns
// prefixed with the step's name.
func Run(steps ...Step) error {
	for _, s := range steps {
		if err := s.Do(); err != nil {
			return fmt.Errorf("%s: %w", s.What, err)
		}
	}
	return nil
}
