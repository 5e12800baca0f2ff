package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/calltrace"
)

// LaunchConfig is a launch's shape and what cuLaunchKernelEx adds to cuLaunchKernel:
// cooperative launches, thread block clusters, programmatic dependent launch and a
// priority per launch. The zero value of each addition leaves it out.
type LaunchConfig struct {
	Grid, Block Dim3
	// SharedMem is the dynamic shared memory per block, in bytes. Above 48 KiB the
	// function's limit (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) is raised
	// to it first, up to the device's opt-in maximum.
	SharedMem int
	// Cooperative makes every block of the grid resident at once, so that the
	// kernel may synchronize the whole grid (cooperative_groups::this_grid().sync()).
	// The grid must fit the device at once: see Function.MaxActiveBlocks.
	Cooperative bool
	// Cluster groups the grid's blocks into thread block clusters of these
	// dimensions (compute capability 9.0 and later), whose blocks share
	// distributed shared memory; each of Grid's dimensions must be a multiple of
	// Cluster's. Zero: no clusters (or those the kernel was compiled with).
	Cluster Dim3
	// Programmatic lets the kernel start before the kernel queued before it on
	// the stream has finished (programmatic dependent launch): the kernel must
	// call cudaGridDependencySynchronize (griddepcontrol.wait) before it reads
	// what the earlier kernel writes, and the earlier one may trigger it sooner
	// with cudaTriggerProgrammaticLaunchCompletion.
	Programmatic bool
	// Priority is the launch's priority, in the range of Context.StreamPriorities
	// (lower numbers are higher priorities); 0: the stream's.
	Priority int
}

// maxDefaultSharedMem is the dynamic shared memory a kernel may use without
// raising its limit.
const maxDefaultSharedMem = 48 << 10

// LaunchWith queues the kernel on s as Launch does (the same arguments, checks,
// hand-off and errors) with the shape and the additions of cfg, through
// cuLaunchKernelEx. A cfg with no addition is Launch itself. A cluster shape the grid is not a multiple of, or a negative
// priority out of range, is an error matching ErrInvalidArgument before anything is
// queued; a cooperative grid larger than the device holds at once fails in the
// driver (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE).
func (f *Function) LaunchWith(s *Stream, cfg LaunchConfig, args ...any) error {
	d, err := f.launchDims(cfg.Grid, cfg.Block, cfg.SharedMem)
	if err != nil {
		return err
	}
	ex, err := cfg.attributes(d)
	if err != nil {
		return fmt.Errorf("cuda: launching %s: %w", f.name, err)
	}
	if ex.n == 0 {
		return f.Launch(s, cfg.Grid, cfg.Block, cfg.SharedMem, args...)
	}
	if h := calltrace.Load(); h != nil { // a timeline runs (cupti): it names the Go call behind the work
		defer h.End(h.Begin("Launch"))
	}
	if err := f.enterLaunch(s, d); err != nil {
		return err
	}
	return f.launchMore(s, d, args, &ex)
}

// launchAttrs is a configured launch's cuLaunchKernelEx attributes.
type launchAttrs struct {
	n     int
	attrs [4]cudaraw.CUlaunchAttribute
}

func (a *launchAttrs) add(id cudaraw.CUlaunchAttributeID) *cudaraw.CUlaunchAttributeValue {
	at := &a.attrs[a.n]
	at.Id = id
	a.n++
	return &at.Value
}

// attributes checks cfg's additions against the launch's shape d and returns them.
func (cfg *LaunchConfig) attributes(d launchShape) (launchAttrs, error) {
	var a launchAttrs
	if cfg.Cooperative {
		*a.add(cudaraw.CU_LAUNCH_ATTRIBUTE_COOPERATIVE).Cooperative() = 1
	}
	if cfg.Cluster != (Dim3{}) {
		cl := cfg.Cluster.norm()
		if !cl.fits() || d.gx%uint32(cl.X) != 0 || d.gy%uint32(cl.Y) != 0 || d.gz%uint32(cl.Z) != 0 {
			return a, fmt.Errorf("%w: cluster %v does not divide grid %v", ErrInvalidArgument, cfg.Cluster, Dim3{int(d.gx), int(d.gy), int(d.gz)})
		}
		*a.add(cudaraw.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).ClusterDim() = cudaraw.CUlaunchAttributeValue_ClusterDim{
			X: uint32(cl.X), Y: uint32(cl.Y), Z: uint32(cl.Z)}
	}
	if cfg.Programmatic {
		*a.add(cudaraw.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION).ProgrammaticStreamSerializationAllowed() = 1
	}
	if cfg.Priority != 0 {
		if int(int32(cfg.Priority)) != cfg.Priority {
			return a, fmt.Errorf("%w: priority %d", ErrInvalidArgument, cfg.Priority)
		}
		*a.add(cudaraw.CU_LAUNCH_ATTRIBUTE_PRIORITY).Priority() = int32(cfg.Priority)
	}
	return a, nil
}

// raiseSharedMem raises f's dynamic shared memory limit to at least n bytes, once
// per size above the last: the attribute belongs to the function, and every
// launch of it may then use that much.
func (f *Function) raiseSharedMem(n int) error {
	for {
		cur := f.sharedMem.Load()
		if int64(n) <= cur {
			return nil
		}
		m := f.mod
		if err := m.rlock(); err != nil {
			return err
		}
		err := cudaraw.FuncSetAttributeIn(m.ctx.h, f.h, cudaraw.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int32(n))
		m.runlock()
		if err != nil {
			return fmt.Errorf("cuda: raising %s's dynamic shared memory to %d bytes: %w", f.name, n, err)
		}
		if f.sharedMem.CompareAndSwap(cur, int64(n)) {
			return nil
		}
	}
}

// launchEx launches f through cuLaunchKernelEx with the packed parameters and the
// attributes in ex. The configuration, its attributes and the parameters' extra
// array are pinned for the call: they hold Go pointers that the driver reads.
func launchEx(ctx cudaraw.CUcontext, f cudaraw.CUfunction, d launchShape, s cudaraw.CUstream, params []byte, ex *launchAttrs) error {
	cfg := &cudaraw.CUlaunchConfig{GridDimX: d.gx, GridDimY: d.gy, GridDimZ: d.gz, BlockDimX: d.bx, BlockDimY: d.by,
		BlockDimZ: d.bz, SharedMemBytes: d.shm, HStream: s}
	var pin runtime.Pinner
	defer pin.Unpin()
	// A copy of the parameters on the heap, to pin: the caller's may be on its
	// stack (a separate variable, so that params itself does not escape).
	heap := append([]byte(nil), params...)
	attrs := ex.attrs
	if ex.n > 0 {
		pin.Pin(&attrs[0])
		cfg.Attrs, cfg.NumAttrs = &attrs[0], uint32(ex.n)
	}
	var extra *unsafe.Pointer
	if len(heap) > 0 {
		size := new(uint64)
		*size = uint64(len(heap))
		e := &[5]unsafe.Pointer{hostPointer(1), unsafe.Pointer(&heap[0]), hostPointer(2), unsafe.Pointer(size), nil}
		pin.Pin(&heap[0])
		pin.Pin(size)
		pin.Pin(e)
		extra = &e[0]
	}
	pin.Pin(cfg)
	return cudaraw.LaunchKernelExIn(ctx, cfg, f, nil, extra)
}

// MaxActiveBlocks returns how many blocks of blockSize threads, each with
// sharedMem bytes of dynamic shared memory, one multiprocessor runs at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor): times the device's
// multiprocessors, the largest cooperative grid.
func (f *Function) MaxActiveBlocks(blockSize, sharedMem int) (int, error) {
	var n int32
	err := f.occupancy(blockSize, sharedMem, func(ctx cudaraw.CUcontext) error {
		return cudaraw.OccupancyMaxActiveBlocksPerMultiprocessorIn(ctx, &n, f.h, int32(blockSize), uint64(sharedMem))
	})
	return int(n), err
}

// SuggestedBlockSize returns the block size that gives f the most resident threads
// with sharedMem bytes of dynamic shared memory per block, and the fewest blocks
// that fill the device at that size (cuOccupancyMaxPotentialBlockSize).
func (f *Function) SuggestedBlockSize(sharedMem int) (blockSize, minGrid int, err error) {
	var b, g int32
	err = f.occupancy(1, sharedMem, func(ctx cudaraw.CUcontext) error {
		return cudaraw.OccupancyMaxPotentialBlockSizeIn(ctx, &g, &b, f.h, 0, uint64(sharedMem), 0)
	})
	return int(b), int(g), err
}

// occupancy checks an occupancy question's arguments and asks it under the
// module's read lock.
func (f *Function) occupancy(blockSize, sharedMem int, ask func(ctx cudaraw.CUcontext) error) error {
	if f == nil || f.mod == nil {
		return fmt.Errorf("%w: nil *cuda.Function", ErrInvalidArgument)
	}
	if blockSize < 1 || blockSize > 1<<20 || sharedMem < 0 || sharedMem > 1<<30 {
		return fmt.Errorf("%w: block size %d, shared memory %d", ErrInvalidArgument, blockSize, sharedMem)
	}
	m := f.mod
	if err := checkModule(m); err != nil {
		return err
	}
	if err := m.rlock(); err != nil {
		return err
	}
	defer m.runlock()
	if err := ask(m.ctx.h); err != nil {
		return fmt.Errorf("cuda: occupancy of %s: %w", f.name, err)
	}
	return nil
}
