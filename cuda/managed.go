package cuda

import (
	"github.com/gocuda/gocuda/resource"
)

// ManagedBuffer is unified (managed) memory: one address that both the host and the
// GPU use, its pages migrating on demand. It comes from a managed memory pool (where
// the driver has none, from cuMemAllocManaged), through a cache of freed blocks, like
// HostBuffer. Bytes and ManagedSlice expose it to Go; Ptr is for kernels.
//
// As with HostBuffer, the slices are valid until Close or until the buffer becomes
// unreachable, and must not hold Go pointers. Do not touch the memory from the host
// while GPU work that uses it is running. Its concurrency contract is HostBuffer's.
type ManagedBuffer struct {
	m   memBase
	blk *hostBlock
}

func (b *ManagedBuffer) base() *memBase {
	if b == nil {
		return nil
	}
	return &b.m
}

// AllocManaged allocates bytes of unified memory for device 0's primary context.
func AllocManaged(bytes int) (*ManagedBuffer, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	c, err := defaultContext()
	if err != nil {
		return nil, err
	}
	return c.allocManaged(bytes, 2)
}

// AllocManaged allocates bytes of unified memory for the context, ready for the host
// when it returns.
func (c *Context) AllocManaged(bytes int) (*ManagedBuffer, error) {
	if err := checkSize(bytes); err != nil {
		return nil, err
	}
	return c.allocManaged(bytes, 2)
}

func (c *Context) allocManaged(bytes, skip int) (*ManagedBuffer, error) {
	ms, blk, err := c.allocHostKind(KindUnified, bytes)
	if err != nil {
		return nil, err
	}
	b := &ManagedBuffer{m: memBase{ctx: c, ms: ms, ptr: blk.ptr, size: bytes, elem: 1, kind: KindUnified}, blk: blk}
	resource.ResourceFinalizerAt(&b.m.regv, (*ManagedBuffer).free, b, finalizeManaged, false, ms.regOpts(KindUnified, skip)...)
	ms.track(&b.m, blk, skip)
	return b, nil
}

// finalizeManaged is a ManagedBuffer's finalizer: it queues the release.
func finalizeManaged(b *ManagedBuffer) { resource.Finalized(&b.m.regv, b) }

func (b *ManagedBuffer) free() error {
	s, gen := b.m.retire()
	blk := b.blk
	b.blk = nil
	return b.m.ms.unified.putFrom(&b.m, blk, s, gen)
}

// Ptr returns the memory's address, the same on the host and the device.
func (b *ManagedBuffer) Ptr() CUdeviceptr { return b.base().ptrOrZero() }

// Size returns the buffer's size in bytes.
func (b *ManagedBuffer) Size() int { return b.base().sizeOrZero() }

// Context returns the buffer's context.
func (b *ManagedBuffer) Context() *Context { return b.base().context() }

// Bytes returns the memory as a byte slice of length Size; nil for a nil or closed
// buffer.
func (b *ManagedBuffer) Bytes() []byte { return hostBytes(b.base()) }

// Close releases the memory, reused once the GPU work queued so far on the stream
// that last used it has finished; it does not wait. Closing again returns an error
// matching ErrClosed.
func (b *ManagedBuffer) Close() error { return b.base().close() }

// Free is Close.
func (b *ManagedBuffer) Free() error { return b.base().close() }

func (b *ManagedBuffer) holdArg() (CUdeviceptr, *Context, error) { return b.base().holdArg() }

func (b *ManagedBuffer) releaseArg(s *stream) { b.m.releaseArg(s) }

// ManagedSlice returns b's memory as a []T of length b.Size()/sizeof(T), or nil if b
// is nil or closed or T holds Go pointers.
func ManagedSlice[T any](b *ManagedBuffer) []T { return viewSlice[T](b.base()) }
