package cuda

import (
	"context"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// The hand-off methods of every kind of memory (access.go has the machinery). Each
// type has its own, so that they work on a nil buffer.

// UseOn orders work that this package does not see — queued on s through the raw
// layer, another library or cgo — with the buffer's other uses: s waits on the device
// for the earlier conflicting uses on other streams (for a Read, the last write; for
// a Write, every use), and later uses, and the free, wait for s. Call it before
// queuing that work, as PyTorch's record_stream but ordering both ways.
func (b *DeviceBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *HostBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *ManagedBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// UseOn is DeviceBuffer.UseOn.
func (b *WrappedBuffer) UseOn(s *Stream, a Access) error { return useOn(b.base(), s, a) }

// Synchronize waits on the host until every use of the buffer queued so far, on any
// stream, has finished (and, through the hand-off, the work those uses waited for).
func (b *DeviceBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is DeviceBuffer.Synchronize: after it the host may read what the GPU
// wrote into the memory, and write what the GPU will read.
func (b *HostBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is HostBuffer.Synchronize. Unified memory is coherent only between
// kernels: synchronize before the host touches memory that GPU work uses.
func (b *ManagedBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// Synchronize is HostBuffer.Synchronize, for the Go slice the buffer wraps.
func (b *WrappedBuffer) Synchronize() error { return syncMem(context.Background(), b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *DeviceBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *HostBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *ManagedBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// SynchronizeContext is Synchronize, returning early with ctx's error once ctx is
// done.
func (b *WrappedBuffer) SynchronizeContext(ctx context.Context) error { return syncMem(ctx, b.base()) }

// ForeignPtr waits until every use of the buffer queued so far has finished, then
// returns its address: the one way to hand the memory to code that this package
// does not order (cgo, another library, a raw call on a stream of its own). The
// address stays valid until Close; keep the buffer reachable while it is used. Work
// that the foreign code queues on a stream should be announced with UseOn instead.
func (b *DeviceBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *HostBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *ManagedBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }

// ForeignPtr is DeviceBuffer.ForeignPtr.
func (b *WrappedBuffer) ForeignPtr() (cudaraw.CUdeviceptr, error) { return foreignPtr(b.base()) }
