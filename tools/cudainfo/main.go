// Command cudainfo is gocuda's device report: the driver, each CUDA library gocuda
// binds (found, its version and file, or why not), every device with its memory and
// compute capability, the peer matrix (which device can access which, with the
// driver's performance rank and native atomics), a one-second self-check of each
// device (allocate, copy, run a kernel, check, free), the health NVML reports of every
// device (utilization, memory, clocks, power, temperature, ECC, retired pages and
// remapped rows, throttle reasons, MIG mode), and the memory pools of every device.
//
//	go run ./tools/cudainfo
//
// Without a GPU it prints what it looked for and exits with status 1.
package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
	"github.com/gocuda/gocuda/nvml"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// selfcheckPTX is cuda/testdata/kernels.ptx (nvcc 13.0, sm_90, from kernels.cu): the
// self-check uses its fill_u32 kernel.
//
//go:embed selfcheck.ptx
var selfcheckPTX []byte

func main() {
	if err := report(os.Stdout, options{kernels: true}); err != nil {
		fmt.Fprintln(os.Stderr, "cudainfo:", err)
		os.Exit(1)
	}
}

// library is one row of the library table.
type library struct {
	lib     *dl.Library
	version func() (string, error)
}

func property(get func(cudaraw.LibraryPropertyType, *int32) error) func() (string, error) {
	return func() (string, error) {
		var v [3]int32
		for i, p := range []cudaraw.LibraryPropertyType{cudaraw.MAJOR_VERSION, cudaraw.MINOR_VERSION, cudaraw.PATCH_LEVEL} {
			if err := get(p, &v[i]); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
	}
}

// options are report's: kernels false leaves the kernel out of the self-check (the
// tests on the fake driver, which runs no kernel).
type options struct {
	kernels bool
}

func report(w io.Writer, opts options) error {
	libs := []library{
		{cudaraw.Library(), func() (string, error) {
			var v int32
			if err := cudaraw.DriverGetVersion(&v); err != nil {
				return "", err
			}
			return fmt.Sprintf("%d.%d (driver API; bindings generated from CUDA %d.%d headers)", v/1000, v%1000/10,
				cudaraw.CUDA_VERSION/1000, cudaraw.CUDA_VERSION%1000/10), nil
		}},
		{cublasraw.Library(), property(cublasraw.GetProperty)},
		{cufftraw.Library(), property(cufftraw.GetProperty)},
		{curandraw.Library(), property(curandraw.GetProperty)},
		{cusparseraw.Library(), property(cusparseraw.GetProperty)},
		{cudnnraw.Library(), func() (string, error) {
			v, err := cudnnraw.GetVersion()
			return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100), err
		}},
		{cusolverraw.Library(), property(cusolverraw.GetProperty)},
		{nvrtcraw.Library(), func() (string, error) {
			var major, minor int32
			err := nvrtcraw.Version(&major, &minor)
			return fmt.Sprintf("%d.%d", major, minor), err
		}},
		{ncclraw.Library(), func() (string, error) {
			var v int32
			err := ncclraw.GetVersion(&v)
			return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100), err
		}},
		{nvmlraw.Library(), func() (string, error) {
			s, err := nvml.Open()
			if err != nil {
				return "", err
			}
			defer s.Close()
			return s.Version()
		}},
		{cuptiraw.Library(), func() (string, error) {
			var v cudaraw.Cuuint32
			err := cuptiraw.GetVersion(&v)
			return fmt.Sprintf("API %d", v), err
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
	if err := cudaraw.Init(0); err != nil {
		if errors.Is(err, dl.ErrLibraryNotFound) {
			return fmt.Errorf("no CUDA driver: %s could not be loaded (looked for %s; set %s to its path): %w",
				cudaraw.Library().Name(), cudaraw.Library().Soname(), cudaraw.Library().EnvVar(), err)
		}
		return fmt.Errorf("the CUDA driver did not initialize: %w", err)
	}
	var n int32
	if err := cudaraw.DeviceGetCount(&n); err != nil {
		return err
	}
	fmt.Fprintf(w, "devices: %d\n", n)
	for i := int32(0); i < n; i++ {
		var dev cudaraw.CUdevice
		if err := cudaraw.DeviceGet(&dev, i); err != nil {
			return err
		}
		name := make([]byte, 256)
		if err := cudaraw.DeviceGetName(&name[0], int32(len(name)), dev); err != nil {
			return err
		}
		var mem uint64
		if err := cudaraw.DeviceTotalMem(&mem, dev); err != nil {
			return err
		}
		var major, minor, sms int32
		for _, a := range []struct {
			v    *int32
			attr cudaraw.CUdevice_attribute
		}{
			{&major, cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
			{&minor, cudaraw.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
			{&sms, cudaraw.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
		} {
			if err := cudaraw.DeviceGetAttribute(a.v, a.attr, dev); err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "  %d: %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n",
			i, cstring(name), float64(mem)/(1<<30), major, minor, sms)
	}
	if n == 0 {
		return errors.New("the CUDA driver found no device")
	}
	if err := peerMatrix(w, int(n)); err != nil {
		return err
	}
	var failed []string
	what := "alloc, copy, kernel, free"
	if !opts.kernels {
		what = "alloc, copy, free; no kernel"
	}
	for i := 0; i < int(n); i++ {
		t0 := time.Now()
		if err := selfCheck(cuda.Device(i), opts.kernels); err != nil {
			fmt.Fprintf(w, "self-check device %d: FAILED: %v\n", i, err)
			failed = append(failed, fmt.Sprint(i))
			continue
		}
		fmt.Fprintf(w, "self-check device %d: ok (%s) in %v\n", i, what, time.Since(t0).Round(time.Microsecond))
	}
	health(w, int(n))
	st, err := cuda.MemoryStatus()
	if err != nil {
		fmt.Fprintf(w, "memory status: %v\n", err)
	}
	fmt.Fprintf(w, "memory pools:\n%s", indent(st.String()))
	if len(failed) != 0 {
		return fmt.Errorf("self-check failed on device %s", strings.Join(failed, ", "))
	}
	return nil
}

// peerMatrix prints which device can access which (cuDeviceCanAccessPeer), with the
// driver's performance rank of the link (lower is faster) and whether atomics are
// native over it (cuDeviceGetP2PAttribute).
func peerMatrix(w io.Writer, n int) error {
	if n < 2 {
		fmt.Fprintln(w, "peer access: one device, no peer (the matrix is trivial)")
		return nil
	}
	fmt.Fprintln(w, "peer access (row device accesses column device's memory; rN: performance rank, lower is faster; atomics: native):")
	const width = 18
	var line strings.Builder
	fmt.Fprintf(&line, "  %-8s", "")
	for j := range n {
		fmt.Fprintf(&line, "%-*s", width, fmt.Sprintf("to %d", j))
	}
	fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	for i := range n {
		line.Reset()
		fmt.Fprintf(&line, "  %-8s", fmt.Sprintf("from %d", i))
		for j := range n {
			cell, err := peerCell(i, j)
			if err != nil {
				return fmt.Errorf("peer access from device %d to device %d: %w", i, j, err)
			}
			fmt.Fprintf(&line, "%-*s", width, cell)
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	return nil
}

// peerCell is the matrix's entry for device i accessing device j.
func peerCell(i, j int) (string, error) {
	if i == j {
		return "-", nil
	}
	var di, dj cudaraw.CUdevice
	if err := cudaraw.DeviceGet(&di, int32(i)); err != nil {
		return "", err
	}
	if err := cudaraw.DeviceGet(&dj, int32(j)); err != nil {
		return "", err
	}
	var can int32
	if err := cudaraw.DeviceCanAccessPeer(&can, di, dj); err != nil {
		return "", err
	}
	if can == 0 {
		return "no", nil
	}
	cell := "yes"
	var rank, atomics int32
	if err := cudaraw.DeviceGetP2PAttribute(&rank, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, di, dj); err == nil {
		cell += fmt.Sprintf(" r%d", rank)
	}
	if err := cudaraw.DeviceGetP2PAttribute(&atomics, cudaraw.CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, di, dj); err == nil && atomics != 0 {
		cell += " atomics"
	}
	return cell, nil
}

// selfCheck allocates device memory, copies to it, fills it with a kernel (unless
// kernels is false), copies it back and checks it, then frees everything: within a
// second or it fails.
func selfCheck(d cuda.Device, kernels bool) error {
	deadline := time.Now().Add(time.Second)
	ctx, err := d.Context()
	if err != nil {
		return err
	}
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	const n = 1 << 20
	buf, err := cuda.AllocFor[uint32](s, n)
	if err != nil {
		return err
	}
	defer buf.Close()
	host := make([]uint32, n)
	for i := range host {
		host[i] = uint32(i)
	}
	if err := cuda.CopyToDeviceAsync(s, buf, host); err != nil {
		return fmt.Errorf("copy to device: %w", err)
	}
	back := make([]uint32, n)
	if err := cuda.CopyFromDevice(back, buf); err != nil {
		return fmt.Errorf("copy from device: %w", err)
	}
	for i := range back {
		if back[i] != uint32(i) {
			return fmt.Errorf("copy round trip: element %d is %d, want %d", i, back[i], i)
		}
	}
	if !kernels {
		return s.Synchronize()
	}
	mod, err := ctx.LoadModule(selfcheckPTX)
	if err != nil {
		return err
	}
	defer mod.Close()
	fill, err := mod.Function("fill_u32")
	if err != nil {
		return err
	}
	const v = 0x5eed1e55
	if err := fill.Launch(s, cuda.D1(cuda.Blocks(n, 256)), cuda.D1(256), 0, buf, uint32(v), uint64(n)); err != nil {
		return fmt.Errorf("kernel launch: %w", err)
	}
	if err := cuda.CopyFromDeviceAsync(s, back, buf); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	for i := range back {
		if back[i] != v {
			return fmt.Errorf("kernel result: element %d is %#x, want %#x", i, back[i], v)
		}
	}
	if time.Now().After(deadline) {
		return errors.New("took longer than a second")
	}
	return nil
}

// health prints what NVML reports of each CUDA device, matched by UUID; without NVML
// it says why and goes on (NVML is the driver's, but a container may lack it).
func health(w io.Writer, n int) {
	s, err := nvml.Open()
	if err != nil {
		fmt.Fprintf(w, "health: NVML not available: %v\n", err)
		return
	}
	defer s.Close()
	v, err := s.DriverVersion()
	if err != nil {
		v = "unknown: " + err.Error()
	}
	fmt.Fprintf(w, "health (NVML, driver %s):\n", v)
	for i := range n {
		d, err := s.CUDADevice(cuda.Device(i))
		if err != nil {
			fmt.Fprintf(w, "  device %d: %v\n", i, err)
			continue
		}
		uuid, _ := d.UUID()
		bus, _ := d.PCIBusID()
		h, err := d.Health()
		if err != nil {
			fmt.Fprintf(w, "  device %d: %v\n", i, err)
			continue
		}
		fmt.Fprintf(w, "  device %d (NVML %d, %s, %s):\n", i, d.Index(), uuid, bus)
		for _, l := range healthLines(h) {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// healthLines renders a Health, a reading that failed as its error's status.
func healthLines(h nvml.Health) []string {
	failed := func(name string) (string, bool) {
		err := h.Errs[name]
		if err == nil {
			return "", false
		}
		var r nvmlraw.Return
		if errors.As(err, &r) {
			return r.Description(), true
		}
		return err.Error(), true
	}
	gib := func(b uint64) float64 { return float64(b) / (1 << 30) }
	// line renders the reading of h.Errs key name; format starts with its label.
	line := func(name, format string, args ...any) string {
		if why, ok := failed(name); ok {
			label, _, _ := strings.Cut(format, ":")
			return label + ": " + why
		}
		return fmt.Sprintf(format, args...)
	}
	ecc := "ECC: off"
	if h.ECC.Enabled {
		ecc = fmt.Sprintf("ECC: on, errors since the driver loaded %d corrected, %d uncorrected; over the GPU's life %d, %d",
			h.ECC.VolatileCorrected, h.ECC.VolatileUncorrected, h.ECC.AggregateCorrected, h.ECC.AggregateUncorrected)
	}
	mig := "MIG: off"
	if h.MIG.Enabled {
		mig = "MIG: on"
	}
	if h.MIG.Pending != h.MIG.Enabled {
		mig += fmt.Sprintf(" (%v after the next reset)", map[bool]string{true: "on", false: "off"}[h.MIG.Pending])
	}
	return []string{
		line("Utilization", "utilization: GPU %d%%, memory %d%%", h.Utilization.GPU, h.Utilization.Memory),
		line("Memory", "memory: %.2f GiB used, %.2f free, %.2f reserved, of %.2f GiB",
			gib(h.Memory.Used), gib(h.Memory.Free), gib(h.Memory.Reserved), gib(h.Memory.Total)),
		line("Clocks", "clocks: SM %d of %d MHz, memory %d of %d MHz, graphics %d of %d MHz",
			h.Clocks.SM, h.Clocks.MaxSM, h.Clocks.Memory, h.Clocks.MaxMemory, h.Clocks.Graphics, h.Clocks.MaxGraphics),
		line("Power", "power: %.1f W, limit %.1f W, %.1f kJ since the driver loaded",
			float64(h.Power.Usage)/1000, float64(h.Power.Limit)/1000, float64(h.Power.Energy)/1e6),
		line("Temperature", "temperature: %d °C (slowdown at %d, shutdown at %d)", h.Temperature.GPU, h.Temperature.Slowdown, h.Temperature.Shutdown),
		line("ECC", "ECC: %s", strings.TrimPrefix(ecc, "ECC: ")),
		line("RetiredPages", "retired pages: %d single-bit, %d double-bit, pending %v",
			len(h.RetiredPages.SingleBit), len(h.RetiredPages.DoubleBit), h.RetiredPages.Pending),
		line("RemappedRows", "remapped rows: %d correctable, %d uncorrectable, pending %v, failed %v",
			h.RemappedRows.Correctable, h.RemappedRows.Uncorrectable, h.RemappedRows.Pending, h.RemappedRows.Failed),
		line("Throttle", "throttle reasons: %v", h.Throttle),
		line("MIG", "MIG: %s", strings.TrimPrefix(mig, "MIG: ")),
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
