package nvml

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
)

// Device is a GPU as NVML sees it. NVML numbers devices by PCI bus order, which need
// not be CUDA's order (CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES): find the Device of a
// cuda.Device with Session.CUDADevice, which matches them by UUID.
type Device struct {
	s     *Session
	h     nvmlraw.NvmlDevice
	index int
}

// Handle returns the raw nvmlDevice_t, for the nvmlraw functions this package has no
// method for. It stays valid while the Session is open.
func (d *Device) Handle() nvmlraw.NvmlDevice { return d.h }

// Index returns NVML's index of the device (its place in PCI bus order).
func (d *Device) Index() int { return d.index }

func (d *Device) String() string { return fmt.Sprintf("nvml device %d", d.index) }

// DeviceCount returns the number of GPUs NVML sees (all of the machine's, whatever
// CUDA_VISIBLE_DEVICES says).
func (s *Session) DeviceCount() (int, error) {
	if err := s.check("DeviceCount"); err != nil {
		return 0, err
	}
	var n uint32
	if err := nvmlraw.DeviceGetCount(&n); err != nil {
		return 0, wrap("nvmlDeviceGetCount_v2", err)
	}
	return int(n), nil
}

// Device returns the device of NVML index i.
func (s *Session) Device(i int) (*Device, error) {
	if err := s.check("Device"); err != nil {
		return nil, err
	}
	if i < 0 {
		return nil, fmt.Errorf("nvml: device %d: %w", i, nvmlraw.ErrInvalidArgument)
	}
	var h nvmlraw.NvmlDevice
	if err := nvmlraw.DeviceGetHandleByIndex(uint32(i), &h); err != nil {
		return nil, wrap(fmt.Sprintf("nvmlDeviceGetHandleByIndex_v2(%d)", i), err)
	}
	return &Device{s: s, h: h, index: i}, nil
}

// Devices returns every device NVML sees, in its order.
func (s *Session) Devices() ([]*Device, error) {
	n, err := s.DeviceCount()
	if err != nil {
		return nil, err
	}
	devs := make([]*Device, n)
	for i := range devs {
		if devs[i], err = s.Device(i); err != nil {
			return nil, err
		}
	}
	return devs, nil
}

// byHandle completes a Device found by a lookup with its index.
func (s *Session) byHandle(h nvmlraw.NvmlDevice) (*Device, error) {
	var i uint32
	if err := nvmlraw.DeviceGetIndex(h, &i); err != nil {
		return nil, wrap("nvmlDeviceGetIndex", err)
	}
	return &Device{s: s, h: h, index: int(i)}, nil
}

// DeviceByUUID returns the device whose UUID is uuid: "GPU-…", or "MIG-…" for a MIG
// device (an instance of a partitioned GPU, which answers fewer readings than its
// GPU). An unknown UUID gives an error matching ErrNotFound.
func (s *Session) DeviceByUUID(uuid string) (*Device, error) {
	if err := s.check("DeviceByUUID"); err != nil {
		return nil, err
	}
	c := append([]byte(uuid), 0)
	var h nvmlraw.NvmlDevice
	if err := nvmlraw.DeviceGetHandleByUUID(&c[0], &h); err != nil {
		return nil, wrap(fmt.Sprintf("nvmlDeviceGetHandleByUUID(%q)", uuid), err)
	}
	return s.byHandle(h)
}

// DeviceByPCIBusID returns the device at PCI bus id id ("0000:41:00.0", as
// cuDeviceGetPCIBusId writes it, or NVML's "00000000:41:00.0").
func (s *Session) DeviceByPCIBusID(id string) (*Device, error) {
	if err := s.check("DeviceByPCIBusID"); err != nil {
		return nil, err
	}
	c := append([]byte(id), 0)
	var h nvmlraw.NvmlDevice
	if err := nvmlraw.DeviceGetHandleByPciBusId(&c[0], &h); err != nil {
		return nil, wrap(fmt.Sprintf("nvmlDeviceGetHandleByPciBusId_v2(%q)", id), err)
	}
	return s.byHandle(h)
}

// FormatUUID writes a CUDA device UUID (cuDeviceGetUuid's 16 bytes) as NVML names
// GPUs: "GPU-" and the bytes in groups of 4, 2, 2, 2 and 6, in hex.
func FormatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return "GPU-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// CUDADevice returns the NVML device of a CUDA device: by its UUID (cuDeviceGetUuid,
// tried as a GPU's and then as a MIG instance's), else by its PCI bus id, so that CUDA's
// numbering (CUDA_VISIBLE_DEVICES) and NVML's agree. It initializes the CUDA driver
// if nothing has yet.
func (s *Session) CUDADevice(d cuda.Device) (*Device, error) {
	if err := s.check("CUDADevice"); err != nil {
		return nil, err
	}
	// Through package cuda first: it initializes the driver and says why it cannot.
	if _, err := d.Name(); err != nil {
		return nil, fmt.Errorf("nvml: CUDA device %d: %w", int(d), err)
	}
	var dev cudaraw.CUdevice
	if err := cudaraw.DeviceGet(&dev, int32(d)); err != nil {
		return nil, fmt.Errorf("nvml: CUDA device %d: cuDeviceGet: %w", int(d), err)
	}
	var tried []string
	var u cudaraw.CUuuid
	if err := cudaraw.DeviceGetUuid(&u, dev); err == nil {
		id := FormatUUID(u.Bytes)
		for _, uuid := range []string{id, "MIG-" + strings.TrimPrefix(id, "GPU-")} {
			nd, err := s.DeviceByUUID(uuid)
			if err == nil {
				return nd, nil
			}
			if !errors.Is(err, ErrNotFound) && !errors.Is(err, nvmlraw.ErrInvalidArgument) {
				return nil, fmt.Errorf("nvml: CUDA device %d: %w", int(d), err)
			}
			tried = append(tried, "UUID "+uuid)
		}
	} else {
		tried = append(tried, fmt.Sprintf("UUID (cuDeviceGetUuid: %v)", err))
	}
	buf := make([]byte, 32)
	if err := cudaraw.DeviceGetPCIBusId(&buf[0], int32(len(buf)), dev); err != nil {
		return nil, fmt.Errorf("nvml: CUDA device %d: no NVML device by %s; cuDeviceGetPCIBusId: %w", int(d), strings.Join(tried, ", "), err)
	}
	bus := cstring(buf)
	nd, err := s.DeviceByPCIBusID(bus)
	if err != nil {
		return nil, fmt.Errorf("nvml: CUDA device %d: no NVML device by %s, or PCI bus id %s: %w", int(d), strings.Join(tried, ", "), bus, err)
	}
	return nd, nil
}

func (d *Device) check(what string) error { return d.s.check(what) }

// Name returns the product name, such as "NVIDIA H200".
func (d *Device) Name() (string, error) {
	if err := d.check("Name"); err != nil {
		return "", err
	}
	return readString("nvmlDeviceGetName", int(nvmlraw.NVML_DEVICE_NAME_V2_BUFFER_SIZE), func(b *byte, n uint32) error {
		return nvmlraw.DeviceGetName(d.h, b, n)
	})
}

// UUID returns the device's UUID, "GPU-" and 32 hex digits.
func (d *Device) UUID() (string, error) {
	if err := d.check("UUID"); err != nil {
		return "", err
	}
	return readString("nvmlDeviceGetUUID", int(nvmlraw.NVML_DEVICE_UUID_V2_BUFFER_SIZE), func(b *byte, n uint32) error {
		return nvmlraw.DeviceGetUUID(d.h, b, n)
	})
}

// PCIBusID returns the device's PCI bus id as NVML writes it ("00000000:41:00.0").
func (d *Device) PCIBusID() (string, error) {
	if err := d.check("PCIBusID"); err != nil {
		return "", err
	}
	var p nvmlraw.NvmlPciInfo
	if err := nvmlraw.DeviceGetPciInfo(d.h, &p); err != nil {
		return "", wrap("nvmlDeviceGetPciInfo_v3", err)
	}
	return cstring(p.BusId[:]), nil
}
