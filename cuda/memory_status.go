package cuda

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/resource"
)

// MemoryStats is a snapshot of the memory this package manages, as returned by
// MemoryStatus.
type MemoryStats struct {
	// Contexts has one entry per context that has allocated memory through this
	// package, in device order.
	Contexts []ContextMemoryStats
	// WrappedAwaiting is the bytes of WrappedBuffers dropped without Close that
	// await unregistration in resource.Reclaim, in all contexts.
	WrappedAwaiting int64
	// Resources is resource.Status at the time of the snapshot.
	Resources resource.Stats
}

// ContextMemoryStats is the memory of one context.
type ContextMemoryStats struct {
	// Device is the context's device; Primary tells its primary context.
	Device  Device
	Primary bool
	// Free and Total are the device's free and total memory (cuMemGetInfo).
	Free, Total uint64
	// Kinds holds the device, pinned, unified and wrapped memory, indexed by
	// MemoryKind.
	Kinds [4]PoolStats
	// WrappedAwaiting is the bytes of the context's WrappedBuffers dropped without
	// Close that await unregistration in resource.Reclaim.
	WrappedAwaiting int64
}

// PoolStats is the memory of one kind in one context.
type PoolStats struct {
	// Kind is the kind of memory.
	Kind MemoryKind
	// Pool reports whether the memory comes from a stream-ordered pool; if not,
	// PoolError says why (wrapped memory never does).
	Pool      bool
	PoolError error
	// Used and Reserved are the pool's bytes in use and reserved from the driver
	// (CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT). The
	// device pool is shared by everything allocating on the device.
	Used, Reserved uint64
	// Buffers and Bytes count the package's live buffers and their bytes.
	Buffers, Bytes int64
	// Cached and CachedBlocks are the bytes and blocks in the package's caches of
	// freed blocks (device blocks per stream; pinned and unified blocks per
	// context), which count as Used in the pool.
	Cached       int64
	CachedBlocks int
}

// MemoryStatus returns the memory in use and reserved per context and kind, the
// package's counts of live buffers, and resource.Status. A pool whose attributes
// cannot be read is reported with the error, joined into the one returned.
func MemoryStatus() (MemoryStats, error) {
	var st MemoryStats
	var errs []error
	memContexts.Range(func(k, _ any) bool {
		ms := k.(*ctxState).mem.Load()
		if ms == nil {
			return true
		}
		cs, err := ms.status()
		if err == errContextClosed {
			return true // destroyed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
		}
		st.Contexts = append(st.Contexts, cs)
		return true
	})
	sort.SliceStable(st.Contexts, func(i, j int) bool {
		a, b := st.Contexts[i], st.Contexts[j]
		return a.Device < b.Device || a.Device == b.Device && a.Primary && !b.Primary
	})
	for _, c := range st.Contexts {
		st.WrappedAwaiting += c.WrappedAwaiting
	}
	st.Resources = resource.Status()
	return st, errors.Join(errs...)
}

func (ms *memState) status() (ContextMemoryStats, error) {
	c := ms.cs
	cs := ContextMemoryStats{Device: c.dev, Primary: c.primary, WrappedAwaiting: c.wrapAwaiting.Load()}
	if err := c.enter(); err != nil {
		return cs, err // destroyed meanwhile
	}
	defer c.exit()
	var errs []error
	// Locals, not fields of cs: cgo must not see the Go pointers (errors) in cs.
	var free, total uint64
	if err := cudaraw.MemGetInfoIn(c.h, &free, &total); err != nil {
		errs = append(errs, fmt.Errorf("cuda: device %d memory info: %w", int(c.dev), err))
	}
	cs.Free, cs.Total = free, total
	for k := range numKinds {
		cs.Kinds[k] = PoolStats{Kind: k, Buffers: ms.live[k].Load(), Bytes: ms.liveBytes[k].Load()}
	}
	attrs := func(p *PoolStats, pool cudaraw.CUmemoryPool) {
		p.Pool = true
		for _, a := range []struct {
			attr cudaraw.CUmemPool_attribute
			v    *uint64
		}{{cudaraw.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &p.Used}, {cudaraw.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &p.Reserved}} {
			var v uint64
			if err := cudaraw.MemPoolGetAttributeIn(c.h, pool, a.attr, unsafe.Pointer(&v)); err != nil {
				errs = append(errs, fmt.Errorf("cuda: %v pool attribute %v: %w", p.Kind, a.attr, err))
			}
			*a.v = v
		}
	}
	if ms.devReady.Load() {
		p := &cs.Kinds[KindDevice]
		attrs(p, ms.devPool)
		p.Cached, p.CachedBlocks = ms.deviceCacheStats()
	}
	if ms.hostReady.Load() {
		for _, k := range []*hostKind{&ms.pinned, &ms.unified} {
			p := &cs.Kinds[k.kind]
			if k.pool != 0 {
				attrs(p, k.pool)
			} else {
				p.PoolError = k.poolErr
			}
			p.Cached, p.CachedBlocks = k.cacheStats()
		}
	}
	return cs, errors.Join(errs...)
}

// String formats the snapshot for reports, one line per context and kind.
func (s MemoryStats) String() string {
	var b strings.Builder
	for _, c := range s.Contexts {
		which := "primary"
		if !c.Primary {
			which = "own"
		}
		fmt.Fprintf(&b, "device %d (%s context): %s free of %s\n", int(c.Device), which, fmtBytes(int64(c.Free)), fmtBytes(int64(c.Total)))
		for _, p := range c.Kinds {
			fmt.Fprintf(&b, "  %-8s %6d buffers %10s", p.Kind, p.Buffers, fmtBytes(p.Bytes))
			switch {
			case p.Pool:
				fmt.Fprintf(&b, "  pool used %s reserved %s", fmtBytes(int64(p.Used)), fmtBytes(int64(p.Reserved)))
			case p.PoolError != nil:
				fmt.Fprintf(&b, "  no pool (%v)", p.PoolError)
			}
			if p.CachedBlocks > 0 {
				fmt.Fprintf(&b, "  cached %s in %d blocks", fmtBytes(p.Cached), p.CachedBlocks)
			}
			b.WriteByte('\n')
		}
	}
	if s.WrappedAwaiting > 0 {
		fmt.Fprintf(&b, "wrapped memory awaiting unregistration: %s\n", fmtBytes(s.WrappedAwaiting))
	}
	fmt.Fprintf(&b, "resources: %v\n", s.Resources)
	return b.String()
}

func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return ""
}
