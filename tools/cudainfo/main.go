// Command cudainfo is gocuda's device report: the driver, each CUDA library gocuda
// binds (found or why not), and every device with its memory and compute capability.
//
//	go run ./tools/cudainfo
//
// Without a GPU it prints what it looked for and exits with status 1.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gocuda/gocuda/cublas"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cufft"
	"github.com/gocuda/gocuda/curand"
	"github.com/gocuda/gocuda/cusparse"
	"github.com/gocuda/gocuda/dl"
)

func main() {
	if err := report(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cudainfo:", err)
		os.Exit(1)
	}
}

// library is one row of the library table.
type library struct {
	lib     *dl.Library
	version func() (string, error)
}

func property(get func(cuda.LibraryPropertyType, *int32) error) func() (string, error) {
	return func() (string, error) {
		var v [3]int32
		for i, p := range []cuda.LibraryPropertyType{cuda.MAJOR_VERSION, cuda.MINOR_VERSION, cuda.PATCH_LEVEL} {
			if err := get(p, &v[i]); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
	}
}

func report(w io.Writer) error {
	libs := []library{
		{cuda.Library(), func() (string, error) {
			var v int32
			if err := cuda.DriverGetVersion(&v); err != nil {
				return "", err
			}
			return fmt.Sprintf("%d.%d (driver API)", v/1000, v%1000/10), nil
		}},
		{cublas.Library(), property(cublas.GetProperty)},
		{cufft.Library(), property(cufft.GetProperty)},
		{curand.Library(), property(curand.GetProperty)},
		{cusparse.Library(), property(cusparse.GetProperty)},
		{cudnn.Library(), func() (string, error) {
			v, err := cudnn.GetVersion()
			return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100), err
		}},
	}
	fmt.Fprintln(w, "libraries:")
	for _, l := range libs {
		path, err := l.lib.Path()
		if err != nil {
			fmt.Fprintf(w, "  %-9s %-18s not found: %v\n", l.lib.Name(), l.lib.Soname(), err)
			continue
		}
		v, err := l.version()
		if err != nil {
			v = "version unknown: " + err.Error()
		}
		fmt.Fprintf(w, "  %-9s %-18s %s  %s\n", l.lib.Name(), l.lib.Soname(), v, path)
	}
	if err := cuda.Init(0); err != nil {
		if errors.Is(err, dl.ErrLibraryNotFound) {
			return fmt.Errorf("no CUDA driver: %s could not be loaded (looked for %s; set %s to its path): %w",
				cuda.Library().Name(), cuda.Library().Soname(), cuda.Library().EnvVar(), err)
		}
		return fmt.Errorf("the CUDA driver did not initialize: %w", err)
	}
	var n int32
	if err := cuda.DeviceGetCount(&n); err != nil {
		return err
	}
	fmt.Fprintf(w, "devices: %d\n", n)
	for i := int32(0); i < n; i++ {
		var dev cuda.CUdevice
		if err := cuda.DeviceGet(&dev, i); err != nil {
			return err
		}
		name := make([]byte, 256)
		if err := cuda.DeviceGetName(&name[0], int32(len(name)), dev); err != nil {
			return err
		}
		var mem uint64
		if err := cuda.DeviceTotalMem(&mem, dev); err != nil {
			return err
		}
		var major, minor, sms int32
		for _, a := range []struct {
			v    *int32
			attr cuda.CUdevice_attribute
		}{
			{&major, cuda.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
			{&minor, cuda.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
			{&sms, cuda.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
		} {
			if err := cuda.DeviceGetAttribute(a.v, a.attr, dev); err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "  %d: %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n",
			i, cstring(name), float64(mem)/(1<<30), major, minor, sms)
	}
	if n == 0 {
		return errors.New("the CUDA driver found no device")
	}
	return nil
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
