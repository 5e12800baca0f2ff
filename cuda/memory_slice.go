package cuda

import "fmt"

// Moving a Go slice to device memory and back in one call each: the two things every
// program that uploads inputs and reads results does.

// AllocFrom allocates device memory for len(src) elements of T on s (as AllocFor) and
// queues a copy of src into it on s (as CopyToDeviceAsync). It returns once src has
// been read: src may be reused at once. Work queued on s afterwards sees the copy;
// work on other streams is ordered after it by the hand-off. T must be free of Go
// pointers, and src must not be empty.
func AllocFrom[T any](s *Stream, src []T) (*DeviceBuffer, error) {
	b, err := AllocFor[T](s, len(src))
	if err != nil {
		return nil, err
	}
	if err := CopyToDeviceAsync(s, b, src); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// ToSlice returns a new []T holding a copy of all of m, a *DeviceBuffer (or a view),
// *HostBuffer or *ManagedBuffer, once the writes queued to it have finished: device
// memory is read on s after s's earlier work (the hand-off orders it after writes on
// other streams); host-visible memory is read by the host after every queued use of
// it. m's size must be a whole number of elements of T.
func ToSlice[T any](s *Stream, m Memory) ([]T, error) {
	elem, err := elemSize[T]()
	if err != nil {
		return nil, err
	}
	if memOf(m) == nil {
		return nil, fmt.Errorf("cuda: ToSlice: %w: nil memory", ErrInvalidArgument)
	}
	size := m.Size()
	if size%elem != 0 {
		return nil, fmt.Errorf("cuda: ToSlice: %w: %d bytes are not a whole number of %d-byte elements", ErrInvalidArgument, size, elem)
	}
	dst := make([]T, size/elem)
	switch b := m.(type) {
	case *DeviceBuffer:
		if err := CopyFromDeviceAsync(s, dst, b); err != nil {
			return nil, err
		}
	case *HostBuffer:
		if err := hostRead(b.Synchronize, HostSlice[T](b), dst); err != nil {
			return nil, err
		}
	case *ManagedBuffer:
		if err := hostRead(b.Synchronize, HostSlice[T](b), dst); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cuda: ToSlice: %w: %T (a *WrappedBuffer's memory is the Go slice it wraps)", ErrInvalidArgument, m)
	}
	return dst, nil
}

// hostRead copies host-visible memory src into dst once sync has waited for its uses.
// src is nil when the memory is closed or not aligned for the element type.
func hostRead[T any](sync func() error, src, dst []T) error {
	if err := sync(); err != nil {
		return err
	}
	if len(src) != len(dst) {
		return fmt.Errorf("cuda: ToSlice: %w: host memory closed or not aligned for its element type", ErrInvalidArgument)
	}
	copy(dst, src)
	return nil
}
