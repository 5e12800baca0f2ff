package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/nvrtc"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
)

// Cache keeps compiled kernels: in memory for the process, and in Dir across
// processes. The zero Cache keeps them in memory only.
type Cache struct {
	// Dir is the directory of the cache's files; "" keeps nothing on disk. It is
	// made (0700) on first use.
	Dir string
	// MaxBytes bounds the files in Dir: past it the least recently used go. 0
	// means 256 MiB.
	MaxBytes int64

	mu  sync.Mutex
	mem map[string][]byte // compiled images by key
	// compiles counts the compilations the cache could not spare (tests and
	// Stats).
	compiles, hits, diskHits int64
}

// DefaultCache is the cache of every kernel made without one of its own (see the
// package documentation for the variables that set it).
var DefaultCache = defaultCache()

func defaultCache() *Cache {
	c := &Cache{}
	switch dir := os.Getenv("GOCUDA_KERNEL_CACHE"); dir {
	case "off":
	case "":
		if base, err := os.UserCacheDir(); err == nil {
			c.Dir = filepath.Join(base, "gocuda", "kernels")
		}
	default:
		c.Dir = dir
	}
	if n, err := strconv.ParseInt(os.Getenv("GOCUDA_KERNEL_CACHE_SIZE"), 10, 64); err == nil && n > 0 {
		c.MaxBytes = n
	}
	return c
}

// CacheStats counts what a cache did.
type CacheStats struct {
	Compiles int64 // kernels compiled with NVRTC
	Hits     int64 // found in memory
	DiskHits int64 // found in Dir
}

// Stats returns what the cache did so far.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Compiles: c.compiles, Hits: c.hits, DiskHits: c.diskHits}
}

// compileFlags are the NVRTC options of every kernel of this package.
var compileFlags = []string{"-std=c++17"}

// compile is NVRTC (tests replace it): the image to load for source src on arch.
var compile = func(src, name, arch string) ([]byte, error) {
	out, err := nvrtc.Compile(src, name+".cu", nvrtc.Options{Arch: arch, Flags: compileFlags})
	if err != nil {
		return nil, err
	}
	return out.Image(), nil
}

// versions names the driver and NVRTC a compiled image depends on.
var versions = func() string {
	var drv int32
	_ = cudaraw.DriverGetVersion(&drv)
	var major, minor int32
	_ = nvrtcraw.Version(&major, &minor)
	return fmt.Sprintf("driver %d nvrtc %d.%d", drv, major, minor)
}

// image returns the compiled image of src for ctx's device.
func (c *Cache) image(src, name string, ctx *cuda.Context) ([]byte, error) {
	arch, err := nvrtc.DeviceArch(ctx.Device())
	if err != nil {
		return nil, err
	}
	return c.lookup(src, name, arch)
}

// lookup returns the compiled image of src for arch: from memory, from Dir, or from
// NVRTC (then kept in both).
func (c *Cache) lookup(src, name, arch string) ([]byte, error) {
	sum := sha256.Sum256([]byte(strings.Join([]string{src, strings.Join(compileFlags, " "), arch, versions()}, "\x00")))
	key := hex.EncodeToString(sum[:])
	c.mu.Lock()
	if img, ok := c.mem[key]; ok {
		c.hits++
		c.mu.Unlock()
		return img, nil
	}
	c.mu.Unlock()
	img, fromDisk := c.load(key)
	if !fromDisk {
		var err error
		if img, err = compile(src, name, arch); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		c.store(key, img)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fromDisk {
		c.diskHits++
	} else {
		c.compiles++
	}
	if c.mem == nil {
		c.mem = map[string][]byte{}
	}
	c.mem[key] = img
	return img, nil
}

// fileMagic starts each cache file; the SHA-256 of the image follows it, then the
// image.
const fileMagic = "gocuda kernel cache 1\n"

func (c *Cache) path(key string) string { return filepath.Join(c.Dir, key+".bin") }

// load reads key's file: an image whose checksum matches, or nothing (a missing,
// short or corrupt file, which it removes).
func (c *Cache) load(key string) ([]byte, bool) {
	if c.Dir == "" {
		return nil, false
	}
	p := c.path(key)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	head := len(fileMagic) + sha256.Size
	if len(b) < head || string(b[:len(fileMagic)]) != fileMagic {
		_ = os.Remove(p)
		return nil, false
	}
	img := b[head:]
	if sum := sha256.Sum256(img); !bytes.Equal(sum[:], b[len(fileMagic):head]) {
		_ = os.Remove(p)
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // recently used
	return img, true
}

// store writes key's file (through a temporary file and a rename, so that a reader
// never sees half of it) and trims Dir to MaxBytes. Failures leave the disk cache
// as it was: it is a cache.
func (c *Cache) store(key string, img []byte) {
	if c.Dir == "" || os.MkdirAll(c.Dir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(c.Dir, "tmp-*")
	if err != nil {
		return
	}
	sum := sha256.Sum256(img)
	_, err = f.Write(slices.Concat([]byte(fileMagic), sum[:], img))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || os.Rename(f.Name(), c.path(key)) != nil {
		_ = os.Remove(f.Name())
		return
	}
	c.trim()
}

// trim removes the least recently used files of Dir until the rest fit MaxBytes.
func (c *Cache) trim() {
	limit := c.MaxBytes
	if limit <= 0 {
		limit = 256 << 20
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		size int64
		used time.Time
	}
	var files []file
	var total int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".bin") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), info.Size(), info.ModTime()})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
	for _, f := range files {
		if total <= limit {
			break
		}
		if err := os.Remove(filepath.Join(c.Dir, f.name)); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
}

// modules are a kernel's module per context.
type modules struct {
	src, name string
	cache     *Cache
	mu        sync.Mutex
	closed    bool
	byCtx     map[*cuda.Context]*cuda.Module
}

// function returns the kernel fn of the module for ctx, loading it on first use.
func (m *modules) function(ctx *cuda.Context, fn string) (*cuda.Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("kernel %s: %w", m.name, cuda.ErrClosed)
	}
	mod := m.byCtx[ctx]
	if mod == nil {
		img, err := m.cache.image(m.src, m.name, ctx)
		if err != nil {
			return nil, err
		}
		if mod, err = ctx.LoadModule(img); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", m.name, err)
		}
		if m.byCtx == nil {
			m.byCtx = map[*cuda.Context]*cuda.Module{}
		}
		m.byCtx[ctx] = mod
	}
	f, err := mod.Function(fn)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", m.name, err)
	}
	return f, nil
}

// close unloads the modules; launches already queued finish first (Module.Close).
func (m *modules) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("kernel %s: %w", m.name, cuda.ErrClosed)
	}
	m.closed = true
	var errs []error
	for _, mod := range m.byCtx {
		errs = append(errs, mod.Close())
	}
	m.byCtx = nil
	return errors.Join(errs...)
}
