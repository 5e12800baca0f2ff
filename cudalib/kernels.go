package cudalib

import (
	"fmt"
	"sync"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/rescore"
)

// Kernels is a library's own kernels, in PTX that it embeds (no NVRTC needed): a
// module loaded in each context at its first use there and kept for the context's
// life (a module is small, and unloading one waits for the GPU). When the context is
// destroyed its module goes with it, so a later context that the driver gives the
// same handle loads its own.
//
// Make one per PTX file, at package level. Function may be called from any
// goroutine.
type Kernels struct {
	ptx []byte

	mu   sync.Mutex
	mods map[cudaraw.CUcontext]*cuda.Module
}

// NewKernels returns the kernels of ptx. It panics when ptx holds a byte that is
// not ASCII, naming the line: the driver's PTX compiler refuses such a module, even
// in a comment, and a package-level NewKernels then fails at init rather than on
// the GPU.
func NewKernels(ptx []byte) *Kernels {
	line := 1
	for _, c := range ptx {
		if c == '\n' {
			line++
		}
		if c >= 0x80 {
			panic(fmt.Sprintf("cudalib: NewKernels: PTX line %d holds a byte that is not ASCII (%#x)", line, c))
		}
	}
	k := &Kernels{ptx: ptx, mods: map[cudaraw.CUcontext]*cuda.Module{}}
	rescore.OnContextDestroy(k.drop)
	return k
}

// Function returns the kernel name of ctx's module, loading the module on first use.
func (k *Kernels) Function(ctx *cuda.Context, name string) (*cuda.Function, error) {
	if ctx == nil || ctx.Handle() == 0 {
		return nil, fmt.Errorf("cudalib: kernels: %w: nil or zero context", cuda.ErrInvalidArgument)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.mods[ctx.Handle()]
	if m == nil {
		var err error
		if m, err = ctx.LoadModule(k.ptx); err != nil {
			return nil, err
		}
		// Stored with the context held, so that a module is never kept for a
		// destroyed context (whose handle a later one may get).
		if err := ctx.Locked(func() error { k.mods[ctx.Handle()] = m; return nil }); err != nil {
			_ = m.Close()
			return nil, err
		}
	}
	return m.Function(name)
}

// drop forgets the module of the context c, being destroyed (the driver unloads it
// with the context).
func (k *Kernels) drop(c uintptr) {
	k.mu.Lock()
	delete(k.mods, cudaraw.CUcontext(c))
	k.mu.Unlock()
}
