package nvml

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
)

// Utilization is the share of the last sample period (1/6 s to 1 s, by product)
// during which the GPU ran a kernel, and during which its memory was read or written,
// in percent (nvmlDeviceGetUtilizationRates).
type Utilization struct {
	GPU, Memory uint32
}

// Utilization returns the device's utilization rates.
func (d *Device) Utilization() (Utilization, error) {
	if err := d.check("Utilization"); err != nil {
		return Utilization{}, err
	}
	var u nvmlraw.NvmlUtilization
	if err := nvmlraw.DeviceGetUtilizationRates(d.h, &u); err != nil {
		return Utilization{}, wrap("nvmlDeviceGetUtilizationRates", err)
	}
	return Utilization{GPU: u.Gpu, Memory: u.Memory}, nil
}

// Memory is the device memory in bytes. Reserved is what the driver keeps for
// itself (0 where only the older nvmlDeviceGetMemoryInfo answers, which counts it as
// used): Total = Reserved + Used + Free.
type Memory struct {
	Total, Reserved, Used, Free uint64
}

// structVersion is NVML_STRUCT_VERSION: the struct's size, and its version in the top byte.
func structVersion(size uintptr, v uint32) uint32 { return uint32(size) | v<<24 }

// Memory returns the device memory's use (nvmlDeviceGetMemoryInfo_v2, or
// nvmlDeviceGetMemoryInfo on drivers without it).
func (d *Device) Memory() (Memory, error) {
	if err := d.check("Memory"); err != nil {
		return Memory{}, err
	}
	m2 := nvmlraw.NvmlMemory_v2{Version: structVersion(unsafe.Sizeof(nvmlraw.NvmlMemory_v2{}), 2)}
	err := nvmlraw.DeviceGetMemoryInfoV2(d.h, &m2)
	if err == nil {
		return Memory{Total: m2.Total, Reserved: m2.Reserved, Used: m2.Used, Free: m2.Free}, nil
	}
	if !errors.Is(err, dl.ErrSymbolNotFound) && !errors.Is(err, nvmlraw.ErrArgumentVersionMismatch) && !errors.Is(err, ErrNotSupported) {
		return Memory{}, wrap("nvmlDeviceGetMemoryInfo_v2", err)
	}
	var m nvmlraw.NvmlMemory
	if err := nvmlraw.DeviceGetMemoryInfo(d.h, &m); err != nil {
		return Memory{}, wrap("nvmlDeviceGetMemoryInfo", err)
	}
	return Memory{Total: m.Total, Used: m.Used, Free: m.Free}, nil
}

// Clocks are the device's clocks in MHz, now and at most (nvmlDeviceGetClockInfo,
// nvmlDeviceGetMaxClockInfo).
type Clocks struct {
	Graphics, SM, Memory, Video             uint32
	MaxGraphics, MaxSM, MaxMemory, MaxVideo uint32
}

// Clocks returns the device's clocks. A clock the device does not report is 0; the
// error is that of the first clock that failed otherwise.
func (d *Device) Clocks() (Clocks, error) {
	if err := d.check("Clocks"); err != nil {
		return Clocks{}, err
	}
	var c Clocks
	for _, r := range []struct {
		t        nvmlraw.NvmlClockType
		cur, max *uint32
	}{
		{nvmlraw.NVML_CLOCK_GRAPHICS, &c.Graphics, &c.MaxGraphics},
		{nvmlraw.NVML_CLOCK_SM, &c.SM, &c.MaxSM},
		{nvmlraw.NVML_CLOCK_MEM, &c.Memory, &c.MaxMemory},
		{nvmlraw.NVML_CLOCK_VIDEO, &c.Video, &c.MaxVideo},
	} {
		if err := nvmlraw.DeviceGetClockInfo(d.h, r.t, r.cur); err != nil && !errors.Is(err, ErrNotSupported) {
			return c, wrap("nvmlDeviceGetClockInfo", err)
		}
		if err := nvmlraw.DeviceGetMaxClockInfo(d.h, r.t, r.max); err != nil && !errors.Is(err, ErrNotSupported) {
			return c, wrap("nvmlDeviceGetMaxClockInfo", err)
		}
	}
	return c, nil
}

// Power is the board's power draw and the limit the driver enforces, in milliwatts,
// and the energy it has used since the driver was loaded, in millijoules.
type Power struct {
	Usage, Limit uint32
	Energy       uint64
}

// Power returns the device's power readings (nvmlDeviceGetPowerUsage,
// nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetTotalEnergyConsumption). A reading
// the device does not support is 0; the error is ErrNotSupported only when none is.
func (d *Device) Power() (Power, error) {
	if err := d.check("Power"); err != nil {
		return Power{}, err
	}
	var p Power
	errU := nvmlraw.DeviceGetPowerUsage(d.h, &p.Usage)
	errL := nvmlraw.DeviceGetEnforcedPowerLimit(d.h, &p.Limit)
	errE := nvmlraw.DeviceGetTotalEnergyConsumption(d.h, &p.Energy)
	for _, e := range []struct {
		fn  string
		err error
	}{{"nvmlDeviceGetPowerUsage", errU}, {"nvmlDeviceGetEnforcedPowerLimit", errL}, {"nvmlDeviceGetTotalEnergyConsumption", errE}} {
		if e.err != nil && !errors.Is(e.err, ErrNotSupported) {
			return p, wrap(e.fn, e.err)
		}
	}
	if errU != nil && errL != nil && errE != nil {
		return p, wrap("nvmlDeviceGetPowerUsage", errU)
	}
	return p, nil
}

// Temperature is the GPU's temperature and the thresholds at which the driver slows
// it down and shuts it down, in °C (0: not reported).
type Temperature struct {
	GPU, Slowdown, Shutdown uint32
}

// Temperature returns the GPU die's temperature (nvmlDeviceGetTemperatureV, or
// nvmlDeviceGetTemperature on older drivers) and its
// slowdown and shutdown thresholds (nvmlDeviceGetTemperatureThreshold).
func (d *Device) Temperature() (Temperature, error) {
	if err := d.check("Temperature"); err != nil {
		return Temperature{}, err
	}
	var t Temperature
	v := nvmlraw.NvmlTemperature_v1{Version: structVersion(unsafe.Sizeof(nvmlraw.NvmlTemperature_v1{}), 1), SensorType: nvmlraw.NVML_TEMPERATURE_GPU}
	err := nvmlraw.DeviceGetTemperatureV(d.h, &v)
	switch {
	case err == nil:
		t.GPU = uint32(max(v.Temperature, 0))
	case errors.Is(err, dl.ErrSymbolNotFound) || errors.Is(err, nvmlraw.ErrArgumentVersionMismatch):
		// Drivers before nvmlDeviceGetTemperatureV (deprecated in 13.0, still there).
		if err := nvmlraw.DeviceGetTemperature(d.h, nvmlraw.NVML_TEMPERATURE_GPU, &t.GPU); err != nil {
			return t, wrap("nvmlDeviceGetTemperature", err)
		}
	default:
		return t, wrap("nvmlDeviceGetTemperatureV", err)
	}
	for _, r := range []struct {
		which nvmlraw.NvmlTemperatureThresholds
		to    *uint32
	}{{nvmlraw.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &t.Slowdown}, {nvmlraw.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &t.Shutdown}} {
		if err := nvmlraw.DeviceGetTemperatureThreshold(d.h, r.which, r.to); err != nil && !errors.Is(err, ErrNotSupported) {
			return t, wrap("nvmlDeviceGetTemperatureThreshold", err)
		}
	}
	return t, nil
}

// ECC is the device memory's error correction: whether it is on (and will be after
// the next reset), and its error counts, since the driver loaded (volatile) and over
// the device's life (aggregate).
type ECC struct {
	Enabled, Pending                         bool
	VolatileCorrected, VolatileUncorrected   uint64
	AggregateCorrected, AggregateUncorrected uint64
}

// ECC returns the device's ECC mode and error counts (nvmlDeviceGetEccMode,
// nvmlDeviceGetTotalEccErrors). A device without ECC gives ErrNotSupported.
func (d *Device) ECC() (ECC, error) {
	if err := d.check("ECC"); err != nil {
		return ECC{}, err
	}
	var e ECC
	var cur, pend nvmlraw.NvmlEnableState
	if err := nvmlraw.DeviceGetEccMode(d.h, &cur, &pend); err != nil {
		return e, wrap("nvmlDeviceGetEccMode", err)
	}
	e.Enabled, e.Pending = cur == nvmlraw.NVML_FEATURE_ENABLED, pend == nvmlraw.NVML_FEATURE_ENABLED
	if !e.Enabled {
		return e, nil
	}
	for _, r := range []struct {
		t  nvmlraw.NvmlMemoryErrorType
		c  nvmlraw.NvmlEccCounterType
		to *uint64
	}{
		{nvmlraw.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvmlraw.NVML_VOLATILE_ECC, &e.VolatileCorrected},
		{nvmlraw.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvmlraw.NVML_VOLATILE_ECC, &e.VolatileUncorrected},
		{nvmlraw.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvmlraw.NVML_AGGREGATE_ECC, &e.AggregateCorrected},
		{nvmlraw.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvmlraw.NVML_AGGREGATE_ECC, &e.AggregateUncorrected},
	} {
		if err := nvmlraw.DeviceGetTotalEccErrors(d.h, r.t, r.c, r.to); err != nil && !errors.Is(err, ErrNotSupported) {
			return e, wrap("nvmlDeviceGetTotalEccErrors", err)
		}
	}
	return e, nil
}

// RetiredPages are the device memory pages the driver retired (blacklisted) for
// repeated single-bit or for double-bit ECC errors, by address, and whether a
// retirement waits for the next reset. GPUs since the A100 remap rows instead (see
// RemappedRows) and answer ErrNotSupported.
type RetiredPages struct {
	SingleBit, DoubleBit []uint64
	Pending              bool
}

// RetiredPages returns the device's retired pages (nvmlDeviceGetRetiredPages,
// nvmlDeviceGetRetiredPagesPendingStatus).
func (d *Device) RetiredPages() (RetiredPages, error) {
	if err := d.check("RetiredPages"); err != nil {
		return RetiredPages{}, err
	}
	var r RetiredPages
	for _, c := range []struct {
		cause nvmlraw.NvmlPageRetirementCause
		to    *[]uint64
	}{
		{nvmlraw.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &r.SingleBit},
		{nvmlraw.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &r.DoubleBit},
	} {
		pages, err := d.retired(c.cause)
		if err != nil {
			return r, err
		}
		*c.to = pages
	}
	var pend nvmlraw.NvmlEnableState
	if err := nvmlraw.DeviceGetRetiredPagesPendingStatus(d.h, &pend); err != nil {
		return r, wrap("nvmlDeviceGetRetiredPagesPendingStatus", err)
	}
	r.Pending = pend == nvmlraw.NVML_FEATURE_ENABLED
	return r, nil
}

func (d *Device) retired(cause nvmlraw.NvmlPageRetirementCause) ([]uint64, error) {
	for range 3 { // the count may grow between the two calls
		var n uint32
		if err := nvmlraw.DeviceGetRetiredPages(d.h, cause, &n, nil); err != nil && !errors.Is(err, nvmlraw.ErrInsufficientSize) {
			return nil, wrap("nvmlDeviceGetRetiredPages", err)
		}
		if n == 0 {
			return nil, nil
		}
		pages := make([]uint64, n)
		err := nvmlraw.DeviceGetRetiredPages(d.h, cause, &n, &pages[0])
		if errors.Is(err, nvmlraw.ErrInsufficientSize) {
			continue
		}
		if err != nil {
			return nil, wrap("nvmlDeviceGetRetiredPages", err)
		}
		return pages[:n], nil
	}
	return nil, wrap("nvmlDeviceGetRetiredPages", nvmlraw.ErrInsufficientSize)
}

// RemappedRows are the memory rows the device remapped to spare rows (A100 and
// newer) for correctable and uncorrectable errors, whether a remapping waits for the
// next reset, and whether one failed (the GPU then needs service).
type RemappedRows struct {
	Correctable, Uncorrectable uint32
	Pending, Failed            bool
}

// RemappedRows returns the device's row remapping (nvmlDeviceGetRemappedRows).
func (d *Device) RemappedRows() (RemappedRows, error) {
	if err := d.check("RemappedRows"); err != nil {
		return RemappedRows{}, err
	}
	var r RemappedRows
	var pend, failed uint32
	if err := nvmlraw.DeviceGetRemappedRows(d.h, &r.Correctable, &r.Uncorrectable, &pend, &failed); err != nil {
		return r, wrap("nvmlDeviceGetRemappedRows", err)
	}
	r.Pending, r.Failed = pend != 0, failed != 0
	return r, nil
}

// ThrottleReasons is a set of reasons the clocks run below their maximum (NVML's
// clocks event reasons, formerly throttle reasons).
type ThrottleReasons uint64

// The reasons, with nvml.h's values (nvmlClocksEventReason*, nvmlClocksThrottleReason*).
const (
	ThrottleGPUIdle              ThrottleReasons = 0x1   // nothing runs
	ThrottleApplicationsClocks   ThrottleReasons = 0x2   // clocks set by nvidia-smi -ac
	ThrottleSWPowerCap           ThrottleReasons = 0x4   // power above the limit
	ThrottleHWSlowdown           ThrottleReasons = 0x8   // hardware slowdown (temperature, power brake)
	ThrottleSyncBoost            ThrottleReasons = 0x10  // held to another GPU's clocks
	ThrottleSWThermalSlowdown    ThrottleReasons = 0x20  // temperature above the software limit
	ThrottleHWThermalSlowdown    ThrottleReasons = 0x40  // temperature above the hardware limit
	ThrottleHWPowerBrakeSlowdown ThrottleReasons = 0x80  // the power brake assertion
	ThrottleDisplayClock         ThrottleReasons = 0x100 // display clock setting
)

var throttleNames = []struct {
	r    ThrottleReasons
	name string
}{
	{ThrottleGPUIdle, "gpu idle"}, {ThrottleApplicationsClocks, "applications clocks"},
	{ThrottleSWPowerCap, "sw power cap"}, {ThrottleHWSlowdown, "hw slowdown"},
	{ThrottleSyncBoost, "sync boost"}, {ThrottleSWThermalSlowdown, "sw thermal slowdown"},
	{ThrottleHWThermalSlowdown, "hw thermal slowdown"}, {ThrottleHWPowerBrakeSlowdown, "hw power brake slowdown"},
	{ThrottleDisplayClock, "display clock"},
}

// String lists the reasons ("gpu idle, sw power cap"), "none" for none.
func (r ThrottleReasons) String() string {
	if r == 0 {
		return "none"
	}
	var parts []string
	for _, n := range throttleNames {
		if r&n.r != 0 {
			parts = append(parts, n.name)
			r &^= n.r
		}
	}
	if r != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint64(r)))
	}
	return strings.Join(parts, ", ")
}

// ThrottleReasons returns why the clocks are below their maximum now
// (nvmlDeviceGetCurrentClocksEventReasons, or the older ...ThrottleReasons).
func (d *Device) ThrottleReasons() (ThrottleReasons, error) {
	if err := d.check("ThrottleReasons"); err != nil {
		return 0, err
	}
	var r uint64
	err := nvmlraw.DeviceGetCurrentClocksEventReasons(d.h, &r)
	if errors.Is(err, dl.ErrSymbolNotFound) {
		if err := nvmlraw.DeviceGetCurrentClocksThrottleReasons(d.h, &r); err != nil {
			return 0, wrap("nvmlDeviceGetCurrentClocksThrottleReasons", err)
		}
		return ThrottleReasons(r), nil
	}
	if err != nil {
		return 0, wrap("nvmlDeviceGetCurrentClocksEventReasons", err)
	}
	return ThrottleReasons(r), nil
}

// MIGMode is whether the device is partitioned into MIG instances now, and whether it
// will be after the next reset.
type MIGMode struct {
	Enabled, Pending bool
}

// MIGMode returns the device's MIG mode (nvmlDeviceGetMigMode); a GPU without MIG
// gives ErrNotSupported.
func (d *Device) MIGMode() (MIGMode, error) {
	if err := d.check("MIGMode"); err != nil {
		return MIGMode{}, err
	}
	var cur, pend uint32
	if err := nvmlraw.DeviceGetMigMode(d.h, &cur, &pend); err != nil {
		return MIGMode{}, wrap("nvmlDeviceGetMigMode", err)
	}
	return MIGMode{Enabled: cur == nvmlraw.NVML_DEVICE_MIG_ENABLE, Pending: pend == nvmlraw.NVML_DEVICE_MIG_ENABLE}, nil
}

// Health is every reading of a device at one time. A reading that failed is its
// zero value, and its error is in Errs under the reading's name ("Power",
// "RetiredPages", ...): ErrNotSupported for what the device does not have.
type Health struct {
	Utilization  Utilization
	Memory       Memory
	Clocks       Clocks
	Power        Power
	Temperature  Temperature
	ECC          ECC
	RetiredPages RetiredPages
	RemappedRows RemappedRows
	Throttle     ThrottleReasons
	MIG          MIGMode
	Errs         map[string]error
}

// Health reads everything: utilization, memory, clocks, power, temperature, ECC,
// retired pages, remapped rows, throttle reasons and MIG mode. It fails only where
// the Session is closed; each reading's own error is in Health.Errs.
func (d *Device) Health() (Health, error) {
	if err := d.check("Health"); err != nil {
		return Health{}, err
	}
	var h Health
	h.Errs = map[string]error{}
	note := func(name string, err error) {
		if err != nil {
			h.Errs[name] = err
		}
	}
	var err error
	h.Utilization, err = d.Utilization()
	note("Utilization", err)
	h.Memory, err = d.Memory()
	note("Memory", err)
	h.Clocks, err = d.Clocks()
	note("Clocks", err)
	h.Power, err = d.Power()
	note("Power", err)
	h.Temperature, err = d.Temperature()
	note("Temperature", err)
	h.ECC, err = d.ECC()
	note("ECC", err)
	h.RetiredPages, err = d.RetiredPages()
	note("RetiredPages", err)
	h.RemappedRows, err = d.RemappedRows()
	note("RemappedRows", err)
	h.Throttle, err = d.ThrottleReasons()
	note("Throttle", err)
	h.MIG, err = d.MIGMode()
	note("MIG", err)
	return h, nil
}
