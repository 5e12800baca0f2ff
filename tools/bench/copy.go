package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The copy/<dir>/<kind>/<size> rows: synchronous host ↔ device copies, shown in GB/s.
// C: cuMemcpyHtoD / cuMemcpyDtoH (the legacy stream, synchronous) in floor.cu; the raw
// layer: the same calls; gocuda: cuda's BenchmarkCopyBW (CopyToDevice / CopyFromDevice of
// Go slices, Copy of a HostBuffer).
var (
	copyDirs  = []string{"h2d", "d2h"}
	copyKinds = []string{"pageable-warm", "pageable-fresh", "pinned"}
	copySizes = []struct {
		name, c string // the row's and floor.cu's spelling
		n       int64
	}{{"4KiB", "4k", 4 << 10}, {"1MiB", "1m", 1 << 20}, {"64MiB", "64m", 64 << 20}, {"1GiB", "1g", 1 << 30}}
)

// copyKindDesc says what the host side of a copy row is.
var copyKindDesc = map[string]string{
	"pageable-warm":  "pageable host memory touched before (C: malloc'd, written once; gocuda: a Go slice reused)",
	"pageable-fresh": "fresh pageable host memory, first touched inside the copy (mmap per copy, off the clock)",
	"pinned":         "pinned host memory (C: cuMemHostAlloc; gocuda: Context.AllocHost, through Copy)",
}

// copyKindC is a kind's spelling in floor.cu's function names.
var copyKindC = map[string]string{"pageable-warm": "warm", "pageable-fresh": "fresh", "pinned": "pinned"}

// copyWorkloads returns the copy rows, in floor.cu's order.
func copyWorkloads() []Workload {
	var ws []Workload
	for _, dir := range copyDirs {
		for _, kind := range copyKinds {
			for _, sz := range copySizes {
				call := "cuMemcpyHtoD"
				if dir == "d2h" {
					call = "cuMemcpyDtoH"
				}
				id := "copy/" + dir + "/" + kind + "/" + sz.name
				ws = append(ws, Workload{
					ID:    id,
					Desc:  fmt.Sprintf("%s of %s (synchronous), %s", call, sz.name, copyKindDesc[kind]),
					CFunc: "w_copy_" + dir + "_" + copyKindC[kind] + "_" + sz.c,
					Bytes: sz.n,
					Go:    GoBench{Pkg: "cuda", Bench: "CopyBW", Match: `^BenchmarkCopyBW/` + dir + `/` + kind + `/` + sz.name + `$`},
					Raw:   rawCopy(dir == "h2d", kind, sz.n),
				})
			}
		}
	}
	return ws
}

// rawCopy is a copy row on the raw layer: b.N synchronous copies of n bytes; the device
// buffer and the host memory are set up off the clock (fresh memory per copy).
func rawCopy(toDevice bool, kind string, n int64) func(*testing.B, *Env) error {
	return func(b *testing.B, e *Env) (err error) {
		b.StopTimer()
		var d cudaraw.CUdeviceptr
		if err := cudaraw.MemAlloc(&d, uint64(n)); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, cudaraw.MemFree(d)) }()
		if err := cudaraw.MemsetD8(d, 1, uint64(n)); err != nil {
			return err
		}
		one := func(p unsafe.Pointer) error {
			if toDevice {
				return cudaraw.MemcpyHtoD(d, p, uint64(n))
			}
			return cudaraw.MemcpyDtoH(p, d, uint64(n))
		}
		switch kind {
		case "pageable-warm":
			h := make([]byte, n)
			for i := range h {
				h[i] = byte(i)
			}
			b.StartTimer()
			for range b.N {
				if err := one(unsafe.Pointer(&h[0])); err != nil {
					return err
				}
			}
			b.StopTimer()
		case "pageable-fresh":
			for range b.N {
				h, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					return err
				}
				b.StartTimer()
				err = one(unsafe.Pointer(&h[0]))
				b.StopTimer()
				if err := errors.Join(err, syscall.Munmap(h)); err != nil {
					return err
				}
			}
		case "pinned":
			var p unsafe.Pointer
			if err := cudaraw.MemHostAlloc(&p, uint64(n), 0); err != nil {
				return err
			}
			defer func() { err = errors.Join(err, cudaraw.MemFreeHost(p)) }()
			clear(unsafe.Slice((*byte)(p), n))
			b.StartTimer()
			for range b.N {
				if err := one(p); err != nil {
					return err
				}
			}
			b.StopTimer()
		default:
			return fmt.Errorf("copy kind %q", kind)
		}
		return nil
	}
}

// GBps returns the bandwidth of moving bytes in ns nanoseconds, in GB/s (10^9 bytes
// per second); nil when either is unknown.
func GBps(bytes int64, ns *float64) *float64 {
	if bytes <= 0 || ns == nil || *ns <= 0 {
		return nil
	}
	return ptr(float64(bytes) / *ns)
}

// PCIeLink is a PCI Express link as Linux reports it in sysfs.
type PCIeLink struct {
	BusID              string  // as /sys names the device: "0000:1b:00.0"
	Speed, MaxSpeed    float64 // GT/s per lane: current and the most the link can run
	Width, MaxWidth    int     // lanes
	CurrentErr, MaxErr error   // why a pair could not be read
}

// ReadPCIeLink reads the link of the PCI device busID (cuDeviceGetPCIBusId's spelling,
// any case) under sysRoot ("/sys" outside tests).
func ReadPCIeLink(sysRoot, busID string) PCIeLink {
	l := PCIeLink{BusID: strings.ToLower(strings.TrimSpace(busID))}
	dir := filepath.Join(sysRoot, "bus", "pci", "devices", l.BusID)
	read := func(name string) (float64, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(data)) // "32.0 GT/s PCIe", "16"
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: empty", name)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
	pair := func(speed, width string) (float64, int, error) {
		s, err := read(speed)
		if err != nil {
			return 0, 0, err
		}
		w, err := read(width)
		return s, int(w), err
	}
	l.Speed, l.Width, l.CurrentErr = pair("current_link_speed", "current_link_width")
	l.MaxSpeed, l.MaxWidth, l.MaxErr = pair("max_link_speed", "max_link_width")
	return l
}

// linkGBps is a link's data rate per direction in GB/s: lanes × GT/s × the line
// code's efficiency (8b/10b to 5 GT/s, 128b/130b to 32 GT/s, then FLIT mode's
// 242/256) / 8. Packet headers take a further 5–15% of it in practice.
func linkGBps(gts float64, width int) float64 {
	eff := 128.0 / 130
	switch {
	case gts <= 5:
		eff = 0.8
	case gts > 32:
		eff = 242.0 / 256
	}
	return gts * float64(width) * eff / 8
}

// pcieGen is the PCIe generation of a lane rate.
func pcieGen(gts float64) int {
	for g, r := range []float64{2.5, 5, 8, 16, 32, 64, 128} {
		if gts <= r+0.01 {
			return g + 1
		}
	}
	return 0
}

// String is the line the bench and floor print: the current link and its limit, and
// the most the link can run where that differs (GPUs slow their link when idle).
func (l PCIeLink) String() string {
	if l.CurrentErr != nil {
		return fmt.Sprintf("PCIe %s: link unknown (%v)", l.BusID, l.CurrentErr)
	}
	s := fmt.Sprintf("PCIe %s: Gen%d x%d (%g GT/s): limit %.1f GB/s per direction", l.BusID,
		pcieGen(l.Speed), l.Width, l.Speed, linkGBps(l.Speed, l.Width))
	if l.MaxErr == nil && (l.MaxSpeed != l.Speed || l.MaxWidth != l.Width) {
		s += fmt.Sprintf("; max Gen%d x%d: %.1f GB/s", pcieGen(l.MaxSpeed), l.MaxWidth, linkGBps(l.MaxSpeed, l.MaxWidth))
	}
	return s
}

// devicePCIeLink returns device 0's link, through the raw layer (cuInit, cuDeviceGet,
// cuDeviceGetPCIBusId) and /sys.
func devicePCIeLink() (PCIeLink, error) {
	if err := cudaraw.Init(0); err != nil {
		return PCIeLink{}, err
	}
	var dev cudaraw.CUdevice
	if err := cudaraw.DeviceGet(&dev, 0); err != nil {
		return PCIeLink{}, err
	}
	buf := make([]byte, 64)
	if err := cudaraw.DeviceGetPCIBusId(&buf[0], int32(len(buf)), dev); err != nil {
		return PCIeLink{}, err
	}
	id, _, _ := strings.Cut(string(buf), "\x00")
	return ReadPCIeLink("/sys", id), nil
}
