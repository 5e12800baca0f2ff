package cuda

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// The limits a Context carries, their process defaults and their setters: the
// caches of freed memory (SetCacheLimit), memory pressure (SetGCThreshold), dropped
// WrappedBuffers (SetWrapLimit) and the stream pools (SetStreamLimit).

// Process defaults of the limits of a context; each context starts with them and
// can change its own (Context.SetCacheLimit, SetGCThreshold, SetWrapLimit).
const (
	// DefaultCacheLimit is the bytes of freed memory a context keeps for reuse per
	// kind (device, pinned, unified).
	DefaultCacheLimit = 256 << 20
	// DefaultGCThreshold is the fraction of the device's memory a context may
	// allocate between two pressure collections.
	DefaultGCThreshold = 1.0 / 8
)

// DefaultWrapLimit returns the bytes of dropped WrappedBuffers a context lets await
// unregistration before it runs resource.Reclaim in the background: an eighth of the
// machine's memory (MemTotal in /proc/meminfo), 1 GiB where that is unknown.
func DefaultWrapLimit() int64 {
	defWrap.once.Do(func() {
		defWrap.n = 1 << 30
		if total := memTotal(); total > 0 {
			defWrap.n = total / 8
		}
	})
	return defWrap.n
}

var defWrap struct {
	once sync.Once
	n    int64
}

// limits are a context's limits (see the Context methods that set them).
type limits struct {
	cache   atomic.Int64
	gc      atomic.Uint64 // math.Float64bits of the fraction
	wrap    atomic.Int64
	streams atomic.Int64 // streams lent at a time per pool
}

func (l *limits) init() {
	l.cache.Store(DefaultCacheLimit)
	l.gc.Store(math.Float64bits(DefaultGCThreshold))
	l.wrap.Store(DefaultWrapLimit())
	l.streams.Store(int64(defaultStreamLimit()))
}

// SetCacheLimit sets how many bytes of freed memory the context keeps for reuse per
// kind (device blocks of up to 1 MiB, pinned and unified blocks of up to 64 MiB),
// and returns the previous limit (DefaultCacheLimit at first). 0 turns caching off,
// so that every allocation and free goes to the driver's pools. Blocks already
// cached stay until they are reused or their stream is closed. It does nothing on a
// nil or zero Context.
func (c *Context) SetCacheLimit(bytes int64) (previous int64) {
	if c == nil || c.ctxState == nil {
		return 0
	}
	return c.limits.cache.Swap(max(bytes, 0))
}

// SetGCThreshold sets the fraction of the device's memory that may be allocated in
// the context between two pressure collections (DefaultGCThreshold at first) and
// returns the previous fraction. Zero or a negative value turns pressure
// collections off; values above 1 count as 1. It does nothing on a nil or zero
// Context.
func (c *Context) SetGCThreshold(fraction float64) (previous float64) {
	if c == nil || c.ctxState == nil {
		return 0
	}
	if math.IsNaN(fraction) || fraction < 0 {
		fraction = 0
	}
	fraction = min(fraction, 1)
	return math.Float64frombits(c.limits.gc.Swap(math.Float64bits(fraction)))
}

// SetWrapLimit sets how many bytes of the context's WrappedBuffers dropped without
// Close may await unregistration before the package runs resource.Reclaim in the
// background, and returns the previous limit (DefaultWrapLimit at first). A negative
// value restores the default. It does nothing on a nil or zero Context.
func (c *Context) SetWrapLimit(bytes int64) (previous int64) {
	if c == nil || c.ctxState == nil {
		return 0
	}
	if bytes < 0 {
		bytes = DefaultWrapLimit()
	}
	return c.limits.wrap.Swap(bytes)
}

// memTotal returns MemTotal from /proc/meminfo in bytes, or 0.
func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemTotal:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// DefaultStreamLimit is the number of streams a context's pool for one priority and
// kind lends at a time (see Context.SetStreamLimit), as a multiple of GOMAXPROCS at
// the context's first use of the pool: enough for every thread to keep several
// streams busy, few enough that thousands of goroutines do not make thousands of
// streams.
const DefaultStreamLimit = 4

// SetStreamLimit sets how many streams each of the context's pools (one per priority
// and kind) lends at a time; n ≤ 0 restores the default, DefaultStreamLimit times
// GOMAXPROCS. Acquirers waiting at the old limit are admitted up to the new one.
func (c *Context) SetStreamLimit(n int) error {
	if err := c.check(); err != nil {
		return err
	}
	if n <= 0 {
		n = defaultStreamLimit()
	}
	c.limits.streams.Store(int64(n))
	if list := c.pools.Load(); list != nil {
		for _, p := range *list {
			p.setLimit(n)
		}
	}
	return nil
}

// StreamLimit returns the context's stream limit (SetStreamLimit).
func (c *Context) StreamLimit() int {
	if c == nil || c.ctxState == nil {
		return 0
	}
	return int(c.limits.streams.Load())
}

func defaultStreamLimit() int { return DefaultStreamLimit * runtime.GOMAXPROCS(0) }
