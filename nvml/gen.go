// Package nvml reads the health of NVIDIA GPUs through NVML, the driver's management
// library (libnvidia-ml.so.1): utilization, memory, clocks, power, temperature, ECC
// errors, retired pages and remapped rows, throttle reasons, MIG mode, and Xid
// events (the driver's record of a GPU error) as a channel.
//
// # The idiomatic API
//
//	s, err := nvml.Open()                  // nvmlInit; Close is nvmlShutdown
//	defer s.Close()
//	d, err := s.CUDADevice(cuda.Device(0)) // the same GPU, matched by UUID
//	h, err := d.Health()                   // every reading; h.Errs holds what failed
//	xids, err := d.XidEvents(ctx)          // closes when ctx is done
//	for ev := range xids {
//		log.Print(ev) // nvml device 0: Xid 13 (graphics engine exception: ...)
//	}
//
// Each reading is a method too (Utilization, Memory, Clocks, Power, Temperature, ECC,
// RetiredPages, RemappedRows, ThrottleReasons, MIGMode). NVML numbers GPUs by PCI bus
// order, not CUDA's: Session.CUDADevice finds a cuda.Device's NVML device by its UUID
// (cuDeviceGetUuid), or by its PCI bus id. Session.Watch watches several devices and
// event types with one event set and returns an Events, whose channel C closes when
// its context is done or it is closed; its goroutine waits in nvmlEventSetWait, at
// most 100 ms at a time, and frees the event set as it stops.
//
// Errors name the NVML function that failed and wrap its status, an nvmlraw.Return:
// errors.Is(err, nvml.ErrNotSupported) for what a device lacks (retired pages on a
// GPU that remaps rows, ECC on a GeForce). Without libnvidia-ml.so.1, Open returns a
// *dl.LibraryError matching ErrLibraryNotFound ($GOCUDA_NVML_LIB names another file).
//
// A Session and an Events are closed with Close; one dropped without Close is
// released through package resource in its non-blocking lane (nvmlShutdown, or
// telling the goroutine to stop), never by a finalizer calling NVML.
//
// # The raw layer
//
// Package nvmlraw binds every function of nvml.h, with C names, for what this package
// has no method for: Device.Handle gives the raw nvmlDevice_t.
package nvml

//go:generate go run ../gen -lib nvml
