package nvml_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nvml"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
	"github.com/gocuda/gocuda/nvml/nvmltest"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// open returns a Session, closed at the end of the test; without NVML it skips (or,
// with GOCUDA_GPU_TESTS=require, fails).
func open(t *testing.T) *nvml.Session {
	t.Helper()
	s, err := nvml.Open()
	if err != nil {
		if os.Getenv(cudatest.RequireEnv) == "require" {
			t.Fatalf("nvml.Open: %v (%s=require)", err, cudatest.RequireEnv)
		}
		t.Skipf("no NVML: %v; the NVML tests run on the fake (gcc) or the GPU machine", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestNoLibrary: where libnvidia-ml cannot be loaded, Open and the raw calls return
// its typed error, naming library, soname and variable.
func TestNoLibrary(t *testing.T) {
	if os.Getenv(cudatest.EnvChild) == "" {
		cudatest.Subprocess(t, map[string]string{nvmlraw.SonameEnv: "/nonexistent/libnvidia-ml.so.1"})
		return
	}
	cudatest.NoLibrary(t, nvmlraw.Library(), "nvml", nvmlraw.Soname, nvmlraw.SonameEnv,
		func() error { return nvmlraw.Init() },
		func() error { var n uint32; return nvmlraw.DeviceGetCount(&n) },
		func() error { _, err := nvml.Open(); return err },
	)
	_, err := nvml.Open()
	assert.ErrorIs(t, err, nvml.ErrLibraryNotFound)
	assert.Contains(t, err.Error(), "nvmlInit_v2")
}

// TestStatusErrors checks the Return error values, which need no library.
func TestStatusErrors(t *testing.T) {
	cudatest.StatusErrors(t, nvmlraw.NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED", 3, "not supported",
		nvml.ErrNotSupported, nvml.ErrNoPermission, nvmlraw.Return(123456), nvmlraw.NVML_SUCCESS, "Return")
	assert.Equal(t, "gpu idle, sw power cap", (nvml.ThrottleGPUIdle | nvml.ThrottleSWPowerCap).String())
	assert.Equal(t, "none", nvml.ThrottleReasons(0).String())
	assert.Equal(t, "hw slowdown, 0x1000", (nvml.ThrottleHWSlowdown | 0x1000).String())
	assert.Equal(t, "Xid", nvml.EventXid.String())
	assert.Equal(t, "single-bit ECC|double-bit ECC", (nvml.EventSingleBitECC | nvml.EventDoubleBitECC).String())
	assert.Contains(t, nvml.XidDescription(79), "fallen off the bus")
	assert.Empty(t, nvml.XidDescription(100000))
}

// The throttle reasons are nvml.h's.
func TestThrottleValues(t *testing.T) {
	for _, c := range []struct {
		got  nvml.ThrottleReasons
		want uint64
	}{
		{nvml.ThrottleGPUIdle, nvmlraw.NvmlClocksThrottleReasonGpuIdle},
		{nvml.ThrottleApplicationsClocks, nvmlraw.NvmlClocksThrottleReasonApplicationsClocksSetting},
		{nvml.ThrottleSWPowerCap, nvmlraw.NvmlClocksThrottleReasonSwPowerCap},
		{nvml.ThrottleHWSlowdown, nvmlraw.NvmlClocksThrottleReasonHwSlowdown},
		{nvml.ThrottleSyncBoost, nvmlraw.NvmlClocksThrottleReasonSyncBoost},
		{nvml.ThrottleSWThermalSlowdown, nvmlraw.NvmlClocksThrottleReasonSwThermalSlowdown},
		{nvml.ThrottleHWThermalSlowdown, nvmlraw.NvmlClocksThrottleReasonHwThermalSlowdown},
		{nvml.ThrottleHWPowerBrakeSlowdown, nvmlraw.NvmlClocksThrottleReasonHwPowerBrakeSlowdown},
		{nvml.ThrottleDisplayClock, nvmlraw.NvmlClocksThrottleReasonDisplayClockSetting},
	} {
		assert.Equal(t, c.want, uint64(c.got))
	}
}

func TestFormatUUID(t *testing.T) {
	var b [16]byte
	copy(b[:], "fakecuda")
	b[15] = 1
	assert.Equal(t, "GPU-66616b65-6375-6461-0000-000000000001", nvml.FormatUUID(b))
}

// TestSession: versions, devices, lookups, a second Close, use after Close, and NVML's
// Init count back where it was.
func TestSession(t *testing.T) {
	before, _ := nvmltest.Inits()
	s := open(t)
	v, err := s.DriverVersion()
	require.NoError(t, err)
	assert.NotEmpty(t, v)
	nv, err := s.Version()
	require.NoError(t, err)
	assert.NotEmpty(t, nv)
	cv, err := s.CUDADriverVersion()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cv, 11080)
	t.Logf("driver %s, NVML %s, CUDA %d", v, nv, cv)

	devs, err := s.Devices()
	require.NoError(t, err)
	require.NotEmpty(t, devs)
	for i, d := range devs {
		assert.Equal(t, i, d.Index())
		name, err := d.Name()
		require.NoError(t, err)
		uuid, err := d.UUID()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(uuid, "GPU-"), uuid)
		bus, err := d.PCIBusID()
		require.NoError(t, err)
		t.Logf("%v: %s %s %s", d, name, uuid, bus)
		byUUID, err := s.DeviceByUUID(uuid)
		require.NoError(t, err)
		assert.Equal(t, d.Handle(), byUUID.Handle())
		assert.Equal(t, i, byUUID.Index())
		byBus, err := s.DeviceByPCIBusID(bus)
		require.NoError(t, err)
		assert.Equal(t, d.Handle(), byBus.Handle())
	}
	_, err = s.DeviceByUUID("GPU-00000000-0000-0000-0000-000000000000")
	assert.True(t, errors.Is(err, nvml.ErrNotFound) || errors.Is(err, nvmlraw.ErrInvalidArgument), "%v", err)
	_, err = s.Device(-1)
	assert.Error(t, err)
	if nvmltest.Loaded() {
		// The fake has few of NVML's symbols: a raw call of another returns the typed
		// error naming symbol, library and soname.
		var id uint32
		err := nvmlraw.DeviceGetBoardId(devs[0].Handle(), &id)
		assert.ErrorIs(t, err, dl.ErrSymbolNotFound)
		var se *dl.SymbolError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "nvmlDeviceGetBoardId", se.Symbol)
		assert.Equal(t, "nvml", se.Library)
		assert.Equal(t, nvmlraw.Soname, se.Soname)
	}

	require.NoError(t, s.Close())
	err = s.Close()
	assert.ErrorIs(t, err, nvml.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	_, err = devs[0].Name()
	assert.ErrorIs(t, err, nvml.ErrClosed)
	_, err = s.DeviceCount()
	assert.ErrorIs(t, err, nvml.ErrClosed)
	if nvmltest.Loaded() {
		after, err := nvmltest.Inits()
		require.NoError(t, err)
		assert.Equal(t, before, after, "Open and Close balance nvmlInit and nvmlShutdown")
	}
}

// TestCUDADevice maps CUDA's device 0 to its NVML device by UUID (and, on the fake,
// by PCI bus id where the UUID lookup finds nothing).
func TestCUDADevice(t *testing.T) {
	cudatest.Require(t)
	s := open(t)
	d, err := s.CUDADevice(cuda.Device(0))
	require.NoError(t, err)
	uuid, err := d.UUID()
	require.NoError(t, err)
	name, _ := d.Name()
	cname, err := cuda.Device(0).Name()
	require.NoError(t, err)
	t.Logf("cuda.Device(0) %q is NVML device %d %q %s", cname, d.Index(), name, uuid)
	if !nvmltest.Loaded() {
		assert.Equal(t, cname, name)
		return
	}
	assert.Equal(t, "GPU-66616b65-6375-6461-0000-000000000000", uuid)
	require.NoError(t, nvmltest.UUIDLookup(false))
	t.Cleanup(func() { _ = nvmltest.UUIDLookup(true) })
	byBus, err := s.CUDADevice(cuda.Device(0))
	require.NoError(t, err)
	assert.Equal(t, d.Handle(), byBus.Handle())
}

// TestHealth reads everything; on the fake, the fake's values.
func TestHealth(t *testing.T) {
	s := open(t)
	devs, err := s.Devices()
	require.NoError(t, err)
	for _, d := range devs {
		h, err := d.Health()
		require.NoError(t, err)
		t.Logf("%v: %+v", d, h)
		for name, err := range h.Errs {
			// What a device lacks is not an error of the package.
			assert.True(t, errors.Is(err, nvml.ErrNotSupported) || errors.Is(err, nvml.ErrNoPermission) || errors.Is(err, dl.ErrSymbolNotFound), "%s: %v", name, err)
		}
		assert.LessOrEqual(t, h.Utilization.GPU, uint32(100))
		assert.NotZero(t, h.Memory.Total)
		assert.LessOrEqual(t, h.Memory.Used+h.Memory.Free, h.Memory.Total)
		assert.NotZero(t, h.Clocks.MaxSM)
		assert.NotZero(t, h.Temperature.GPU)
	}
	if !nvmltest.Loaded() {
		return
	}
	h, _ := devs[0].Health()
	assert.Equal(t, nvml.Utilization{GPU: 40, Memory: 20}, h.Utilization)
	assert.Equal(t, nvml.Memory{Total: 80 << 30, Reserved: 1 << 29, Used: 10 << 30, Free: 80<<30 - 1<<29 - 10<<30}, h.Memory)
	assert.Equal(t, nvml.Clocks{Graphics: 1755, SM: 1755, Memory: 2619, Video: 1590, MaxGraphics: 1980, MaxSM: 1980, MaxMemory: 2619, MaxVideo: 1965}, h.Clocks)
	assert.Equal(t, nvml.Power{Usage: 123456, Limit: 700000, Energy: 987654321}, h.Power)
	assert.Equal(t, nvml.Temperature{GPU: 41, Slowdown: 89, Shutdown: 92}, h.Temperature)
	assert.Equal(t, nvml.ECC{Enabled: true, Pending: true, VolatileCorrected: 3, AggregateCorrected: 21}, h.ECC)
	assert.ErrorIs(t, h.Errs["RetiredPages"], nvml.ErrNotSupported)
	assert.Contains(t, h.Errs["RetiredPages"].Error(), "nvmlDeviceGetRetiredPages")
	assert.Equal(t, nvml.RemappedRows{Correctable: 2}, h.RemappedRows)
	assert.Equal(t, nvml.ThrottleGPUIdle|nvml.ThrottleSWPowerCap, h.Throttle)
	assert.Equal(t, nvml.MIGMode{}, h.MIG)
	assert.Len(t, h.Errs, 1)

	h1, _ := devs[1].Health()
	assert.Equal(t, nvml.RetiredPages{DoubleBit: []uint64{0x1234000}}, h1.RetiredPages)
	assert.Equal(t, nvml.MIGMode{Pending: true}, h1.MIG)
	assert.Empty(t, h1.Errs)
}

// TestOlderDriver: where the driver refuses the newest struct versions, Memory and
// Temperature fall back to the older functions.
func TestOlderDriver(t *testing.T) {
	if !nvmltest.Loaded() {
		t.Skip("the fake NVML poses as an older driver")
	}
	if os.Getenv(cudatest.EnvChild) == "" {
		cudatest.Subprocess(t, map[string]string{"FAKENVML_OLD": "1"})
		return
	}
	s := open(t)
	d, err := s.Device(0)
	require.NoError(t, err)
	m, err := d.Memory()
	require.NoError(t, err)
	assert.Equal(t, nvml.Memory{Total: 80 << 30, Used: 10<<30 + 1<<29, Free: 80<<30 - 10<<30 - 1<<29}, m, "nvmlDeviceGetMemoryInfo counts the reserved memory as used")
	tm, err := d.Temperature()
	require.NoError(t, err)
	assert.Equal(t, uint32(41), tm.GPU)
}

// TestXidEvents: an Xid injected into the fake arrives on the channel, which closes
// when the context is done; the event set is freed and NVML shut down.
func TestXidEvents(t *testing.T) {
	s := open(t)
	d, err := s.Device(0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	xids, err := d.XidEvents(ctx)
	require.NoError(t, err)
	if !nvmltest.Loaded() {
		// The real GPU: no Xid is expected; the channel closes with the context.
		cancel()
		waitClosed(t, xids)
		return
	}
	sets, _ := nvmltest.LiveSets()
	assert.Equal(t, 1, sets)
	n, err := nvmltest.Inject(0, uint64(nvml.EventXid), 79)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, _ = nvmltest.Inject(1, uint64(nvml.EventXid), 13) // another device: not watched
	assert.Zero(t, n)
	select {
	case ev := <-xids:
		assert.Equal(t, nvml.EventXid, ev.Type)
		assert.Equal(t, uint64(79), ev.Data)
		assert.Same(t, d, ev.Device)
		assert.Contains(t, ev.String(), "Xid 79 (GPU has fallen off the bus)")
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
	}
	cancel()
	waitClosed(t, xids)
	waitFor(t, func() bool { n, _ := nvmltest.LiveSets(); return n == 0 }, "the event set is freed")
}

// TestWatch: several devices and types with one Events; Close stops it and frees the set.
func TestWatch(t *testing.T) {
	s := open(t)
	devs, err := s.Devices()
	require.NoError(t, err)
	e, err := s.Watch(context.Background(), nvml.EventXid|nvml.EventDoubleBitECC)
	require.NoError(t, err)
	if nvmltest.Loaded() {
		require.GreaterOrEqual(t, len(devs), 2)
		_, _ = nvmltest.Inject(1, uint64(nvml.EventDoubleBitECC), 1)
		ev := <-e.C
		assert.Equal(t, nvml.EventDoubleBitECC, ev.Type)
		assert.Equal(t, 1, ev.Device.Index())
	}
	require.NoError(t, e.Close())
	waitClosed(t, e.C)
	assert.ErrorIs(t, e.Close(), nvml.ErrClosed)
	if nvmltest.Loaded() {
		n, _ := nvmltest.LiveSets()
		assert.Zero(t, n)
		_, err = s.Watch(context.Background(), nvml.EventClock, devs[0]) // the fake supports no clock events
		assert.ErrorIs(t, err, nvml.ErrNotSupported)
		n, _ = nvmltest.LiveSets()
		assert.Zero(t, n, "a failed Watch frees its set")
	}
}

// TestWatchDropped: an Events dropped without Close stops once collected.
func TestWatchDropped(t *testing.T) {
	if !nvmltest.Loaded() {
		t.Skip("counts the fake's event sets")
	}
	s := open(t)
	e, err := s.Watch(context.Background(), nvml.EventXid)
	require.NoError(t, err)
	done := e.Done()
	e = nil
	_ = e
	waitFor(t, func() bool {
		_, _ = resource.Reclaim()
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, "a dropped Events stops")
	waitFor(t, func() bool { n, _ := nvmltest.LiveSets(); return n == 0 }, "its event set is freed")
}

func waitClosed(t *testing.T, ch <-chan nvml.Event) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the channel did not close within 5 s")
		}
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 5 s", what)
}
