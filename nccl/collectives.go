package nccl

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// Element is an element type of the collectives, with its NCCL data type: int8,
// uint8, int32, uint32, int64, uint64, cuda.Float16, cuda.BFloat16, float32 and
// float64.
type Element interface {
	int8 | uint8 | int32 | uint32 | int64 | uint64 | cuda.Float16 | cuda.BFloat16 | float32 | float64
}

// DataType returns the NCCL data type of T.
func DataType[T Element]() ncclraw.NcclDataType {
	dt, _ := cudalib.DataType[T]() // every Element has one
	return dataTypes[dt]
}

// dataTypes are NCCL's names of the Element types, by their CUDA data types.
var dataTypes = cudalib.ByDataType[ncclraw.NcclDataType]{
	cudaraw.CUDA_R_8I:   ncclraw.NcclInt8,
	cudaraw.CUDA_R_8U:   ncclraw.NcclUint8,
	cudaraw.CUDA_R_32I:  ncclraw.NcclInt32,
	cudaraw.CUDA_R_32U:  ncclraw.NcclUint32,
	cudaraw.CUDA_R_64I:  ncclraw.NcclInt64,
	cudaraw.CUDA_R_64U:  ncclraw.NcclUint64,
	cudaraw.CUDA_R_16F:  ncclraw.NcclFloat16,
	cudaraw.CUDA_R_16BF: ncclraw.NcclBfloat16,
	cudaraw.CUDA_R_32F:  ncclraw.NcclFloat32,
	cudaraw.CUDA_R_64F:  ncclraw.NcclFloat64,
}

// Op is a reduction operation of AllReduce, Reduce and ReduceScatter.
type Op = ncclraw.NcclRedOp

// Reduction operations.
const (
	Sum  = ncclraw.NcclSum
	Prod = ncclraw.NcclProd
	Max  = ncclraw.NcclMax
	Min  = ncclraw.NcclMin
	Avg  = ncclraw.NcclAvg // the sum divided by the number of ranks
)

// The collectives run on the caller's stream s, which must belong to the
// communicator's context (Comm.Context: its device's primary context), on memory of
// that context: device buffers and their views (DeviceBuffer.Slice), or any
// cuda.Memory. The element type T is the collective's; memory made for another type
// (cuda.AllocFor) is an error, as is a size that is not a whole number of elements.
// The counts come from the memory, whose sizes must match as each collective says;
// the two buffers may be the same (in place). Every argument is checked before any
// NCCL call: a mismatch is an error matching cuda.ErrInvalidArgument (or
// cuda.ErrWrongContext, or cuda.ErrClosed for closed objects).
//
// A collective is queued with the cuda package's hand-off: s waits on the GPU for
// the conflicting uses of its inputs (read) and outputs (written) on other streams,
// and the buffers and the stream are held until the work is queued. It returns once
// the work is queued, not done: Comm.Wait (or s.Synchronize) waits for it. Its
// matching calls on the other ranks must be queued too for it to finish; NCCL orders
// the collectives of one communicator by their call order, which must be the same on
// every rank. A failure is NCCL's Result, wrapped with the operation's name; an
// asynchronous error the communicator reports meanwhile is an *AsyncError, and
// aborts it. On a watched communicator (Join) that lost a rank, a collective fails
// with the *RankGoneError before NCCL is called.
//
// Inside Group, the collectives that f calls are queued together when f returns.

// AllReduce reduces send over all ranks with op and writes the result to recv on
// every rank: ncclAllReduce. send and recv hold the same number of elements.
func AllReduce[T Element](c *Comm, s *cuda.Stream, send, recv cuda.Memory, op Op) error {
	const name = "all-reduce"
	n, ps, err := elems[T](name, "send", send)
	if err != nil {
		return err
	}
	pr, err := sized[T](name, "recv", recv, n)
	if err != nil {
		return err
	}
	if err := checkOp(name, op); err != nil {
		return err
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return raw.allReduce(ps, pr, uint64(n), dt, op, h, st)
	}, cuda.Reads(send), cuda.Writes(recv))
}

// Broadcast copies root's send to recv on every rank: ncclBroadcast. send is read
// on root only and may be nil elsewhere; on root it holds as many elements as recv
// (or is recv: in place).
func Broadcast[T Element](c *Comm, s *cuda.Stream, send, recv cuda.Memory, root int) error {
	const name = "broadcast"
	n, pr, err := elems[T](name, "recv", recv)
	if err != nil {
		return err
	}
	if err := checkPeer(c, name, "root", root); err != nil {
		return err
	}
	ps := pr
	uses := []cuda.Use{cuda.Writes(recv)}
	if c.Rank() == root {
		if ps, err = sized[T](name, "send", send, n); err != nil {
			return err
		}
		uses = append(uses, cuda.Reads(send))
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return raw.broadcast(ps, pr, uint64(n), dt, int32(root), h, st)
	}, uses...)
}

// Reduce reduces send over all ranks with op into root's recv: ncclReduce. recv is
// written on root only and may be nil elsewhere; on root it holds as many elements
// as send.
func Reduce[T Element](c *Comm, s *cuda.Stream, send, recv cuda.Memory, op Op, root int) error {
	const name = "reduce"
	n, ps, err := elems[T](name, "send", send)
	if err != nil {
		return err
	}
	if err := checkPeer(c, name, "root", root); err != nil {
		return err
	}
	if err := checkOp(name, op); err != nil {
		return err
	}
	pr := ps
	uses := []cuda.Use{cuda.Reads(send)}
	if c.Rank() == root {
		if pr, err = sized[T](name, "recv", recv, n); err != nil {
			return err
		}
		uses = append(uses, cuda.Writes(recv))
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return raw.reduce(ps, pr, uint64(n), dt, op, int32(root), h, st)
	}, uses...)
}

// AllGather gathers every rank's send into recv on every rank, rank r's at element
// r·len(send): ncclAllGather. recv holds Size() times the elements of send. In place,
// send is the view of recv at rank r's place (recv.Slice).
func AllGather[T Element](c *Comm, s *cuda.Stream, send, recv cuda.Memory) error {
	const name = "all-gather"
	n, ps, err := elems[T](name, "send", send)
	if err != nil {
		return err
	}
	if c == nil || c.comm == nil {
		return fmt.Errorf("nccl: %s: %w: nil communicator", name, cuda.ErrInvalidArgument)
	}
	pr, err := sized[T](name, "recv", recv, n*c.Size())
	if err != nil {
		return err
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return raw.allGather(ps, pr, uint64(n), dt, h, st)
	}, cuda.Reads(send), cuda.Writes(recv))
}

// ReduceScatter reduces send over all ranks with op and scatters the result: rank r
// gets the block of elements r·len(recv) to (r+1)·len(recv) in recv:
// ncclReduceScatter. send holds Size() times the elements of recv.
func ReduceScatter[T Element](c *Comm, s *cuda.Stream, send, recv cuda.Memory, op Op) error {
	const name = "reduce-scatter"
	n, pr, err := elems[T](name, "recv", recv)
	if err != nil {
		return err
	}
	if c == nil || c.comm == nil {
		return fmt.Errorf("nccl: %s: %w: nil communicator", name, cuda.ErrInvalidArgument)
	}
	ps, err := sized[T](name, "send", send, n*c.Size())
	if err != nil {
		return err
	}
	if err := checkOp(name, op); err != nil {
		return err
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return raw.reduceScatter(ps, pr, uint64(n), dt, op, h, st)
	}, cuda.Reads(send), cuda.Writes(recv))
}

// Send sends send to rank peer, which receives it with a Recv of as many elements of
// T: ncclSend. A rank's sends and receives that must progress together (an exchange
// between two ranks, a ring) go in one Group.
func Send[T Element](c *Comm, s *cuda.Stream, send cuda.Memory, peer int) error {
	return p2p[T](c, "send", s, send, peer, raw.send, cuda.Reads(send))
}

// Recv receives into recv what rank peer sends with Send: ncclRecv.
func Recv[T Element](c *Comm, s *cuda.Stream, recv cuda.Memory, peer int) error {
	return p2p[T](c, "recv", s, recv, peer, raw.recv, cuda.Writes(recv))
}

// p2p queues call (ncclSend or ncclRecv) of all of m with rank peer.
func p2p[T Element](c *Comm, name string, s *cuda.Stream, m cuda.Memory, peer int,
	call func(unsafe.Pointer, uint64, ncclraw.NcclDataType, int32, ncclraw.NcclComm, cudaraw.CUstream) error, use cuda.Use) error {
	n, p, err := elems[T](name, name, m)
	if err != nil {
		return err
	}
	if err := checkPeer(c, name, "peer", peer); err != nil {
		return err
	}
	dt := DataType[T]()
	return c.queue(name, s, func(h ncclraw.NcclComm, st cudaraw.CUstream) error {
		return call(p, uint64(n), dt, int32(peer), h, st)
	}, use)
}

// elems returns the number of elements of T in m and its address.
func elems[T Element](op, name string, m cuda.Memory) (int, unsafe.Pointer, error) {
	if m == nil {
		return 0, nil, fmt.Errorf("nccl: %s: %w: %s is nil", op, cuda.ErrInvalidArgument, name)
	}
	p, err := cuda.DevicePtr[T](m)
	if err != nil {
		return 0, nil, fmt.Errorf("nccl: %s: %s: %w", op, name, err)
	}
	size := int(unsafe.Sizeof(*new(T)))
	if m.Size()%size != 0 {
		return 0, nil, fmt.Errorf("nccl: %s: %w: %s has %d bytes, not a whole number of %v", op, cuda.ErrInvalidArgument,
			name, m.Size(), reflect.TypeFor[T]())
	}
	return m.Size() / size, unsafe.Pointer(p), nil
}

// sized is elems for memory that must hold exactly n elements.
func sized[T Element](op, name string, m cuda.Memory, n int) (unsafe.Pointer, error) {
	got, p, err := elems[T](op, name, m)
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, fmt.Errorf("nccl: %s: %w: %s must hold %d elements of %v, it holds %d", op, cuda.ErrInvalidArgument,
			name, n, reflect.TypeFor[T](), got)
	}
	return p, nil
}

func checkOp(op string, r ncclraw.NcclRedOp) error {
	if r < 0 || r >= ncclraw.NcclNumOps {
		return fmt.Errorf("nccl: %s: %w: reduction %d", op, cuda.ErrInvalidArgument, int(r))
	}
	return nil
}

func checkPeer(c *Comm, op, what string, r int) error {
	if c == nil || c.comm == nil {
		return fmt.Errorf("nccl: %s: %w: nil communicator", op, cuda.ErrInvalidArgument)
	}
	if r < 0 || r >= c.size {
		return fmt.Errorf("nccl: %s: %w: %s %d of %d ranks", op, cuda.ErrInvalidArgument, what, r, c.size)
	}
	return nil
}

// queued is a collective of a group, queued when the group ends.
type queued struct {
	c    *Comm
	s    *cuda.Stream
	call func(ncclraw.NcclComm, cudaraw.CUstream) error
	uses []cuda.Use
	op   string
}

// queue checks the stream and memory, then queues the call with the hand-off (or,
// inside Group, adds it to the group), polling while NCCL answers ncclInProgress.
func (c *Comm) queue(op string, s *cuda.Stream, call func(ncclraw.NcclComm, cudaraw.CUstream) error, uses ...cuda.Use) error {
	fail := func(err error) error { return fmt.Errorf("nccl: %s: %w", op, err) }
	if c == nil || c.comm == nil {
		return fail(fmt.Errorf("%w: nil communicator", cuda.ErrInvalidArgument))
	}
	if err := cuda.CheckEnqueue(s, uses...); err != nil {
		return fail(err)
	}
	if s.Context().Handle() != c.ctx.Handle() {
		return fail(fmt.Errorf("a stream of another context than the communicator's (device %d's primary context): %w",
			c.dev, cuda.ErrWrongContext))
	}
	if err := c.closedErr(); err != nil {
		return fail(err)
	}
	if err := c.goneErr(ncclraw.NcclSuccess); err != nil {
		return fail(err) // the collective would wait for the lost rank for ever
	}
	if g := currentGroup(); g != nil {
		g.ops = append(g.ops, queued{c, s, call, slices.Clone(uses), op})
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.withCall(func() error {
		return cuda.Enqueue(s, func(_ cudaraw.CUcontext, h cudaraw.CUstream) error {
			return c.ctx.Locked(func() error {
				err := call(c.h, h)
				if err == nil || errors.Is(err, ncclraw.ErrInProgress) {
					// Not queued until the communicator is ready again.
					err = c.poll(nil)
				}
				return err
			})
		}, uses...)
	})
	if err != nil {
		return c.abortOn(op, fail(err))
	}
	return nil
}

// Groups: NCCL groups calls per thread, between ncclGroupStart and ncclGroupEnd, and
// queues their work at ncclGroupEnd. Group runs f locked to its thread and keeps the
// collectives f calls (on its goroutine, the only one that runs on that thread) by
// the thread's id; when f returns, it queues them in one NCCL group, holding every
// stream and buffer from before ncclGroupStart to after ncclGroupEnd, so that the
// hand-off records them once the work is queued.
type group struct {
	depth int
	ops   []queued
}

var (
	groupsMu     sync.Mutex
	groups       = map[int]*group{}
	groupsActive atomic.Int32 // len(groups): the collectives' fast path when 0
)

// currentGroup returns the group of the calling goroutine, if it runs inside Group.
func currentGroup() *group {
	if groupsActive.Load() == 0 {
		return nil
	}
	tid := syscall.Gettid()
	groupsMu.Lock()
	defer groupsMu.Unlock()
	return groups[tid]
}

// Group queues the collectives that f calls, on f's goroutine, as one NCCL group
// (ncclGroupStart … ncclGroupEnd): the collectives of several communicators of this
// process (one per GPU, from NewComms) that one goroutine issues, or sends and
// receives that must progress together. The collectives check their arguments when
// called and return nil; they are queued after f returns nil (nothing is queued if f
// fails or panics), and Group returns the first error of queuing them. Groups nest:
// an inner Group's collectives join the outer one. Collectives that f's other
// goroutines call are not part of the group.
func Group(f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	groupsMu.Lock()
	g := groups[tid]
	if g == nil {
		g = &group{}
		groups[tid] = g
		groupsActive.Add(1)
	}
	g.depth++
	groupsMu.Unlock()
	outer := g.depth > 1
	defer func() {
		groupsMu.Lock()
		g.depth--
		if g.depth == 0 {
			delete(groups, tid)
			groupsActive.Add(-1)
		}
		groupsMu.Unlock()
	}()
	if err := f(); err != nil || outer {
		return err
	}
	return g.run()
}

// run queues the group's collectives: it holds their communicators (in a fixed
// order), their streams and memory (one cuda.Enqueue per stream, nested), and calls
// them between ncclGroupStart and ncclGroupEnd.
func (g *group) run() error {
	if len(g.ops) == 0 {
		return nil
	}
	var comms []*Comm
	var streams []*cuda.Stream
	for _, q := range g.ops {
		if !slices.Contains(comms, q.c) {
			comms = append(comms, q.c)
		}
		if !slices.Contains(streams, q.s) {
			streams = append(streams, q.s)
		}
	}
	slices.SortFunc(comms, func(a, b *Comm) int { return int(a.order) - int(b.order) })
	uses := make([][]cuda.Use, len(streams))
	for _, q := range g.ops {
		i := slices.Index(streams, q.s)
		uses[i] = append(uses[i], q.uses...)
	}
	err := g.queue(comms, streams, uses)
	if err == nil {
		return nil
	}
	var ae *AsyncError
	if errors.As(err, &ae) {
		// A communicator is broken: abort the broken ones (Err), now that none is held.
		for _, c := range comms {
			_ = c.Err()
		}
	}
	return fmt.Errorf("nccl: group: %w", err)
}

// queue holds the communicators, then the streams and memory, and makes the calls.
func (g *group) queue(comms []*Comm, streams []*cuda.Stream, uses [][]cuda.Use) error {
	for _, c := range comms {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.life.RLock()
		defer c.life.RUnlock()
		if err := c.closedErr(); err != nil {
			return err
		}
		if err := c.goneErr(ncclraw.NcclSuccess); err != nil {
			return err
		}
	}
	handles := make([]cudaraw.CUstream, len(streams))
	var enqueue func(i int) error
	enqueue = func(i int) error {
		if i == len(streams) {
			return g.call(comms, streams, handles)
		}
		return cuda.Enqueue(streams[i], func(_ cudaraw.CUcontext, h cudaraw.CUstream) error {
			handles[i] = h
			return enqueue(i + 1)
		}, uses[i]...)
	}
	return enqueue(0)
}

// call makes the group's NCCL calls, each in its communicator's context, and waits
// for the communicators to be ready.
func (g *group) call(comms []*Comm, streams []*cuda.Stream, handles []cudaraw.CUstream) error {
	return comms[0].ctx.Locked(func() error {
		if err := raw.groupStart(); err != nil {
			return fmt.Errorf("ncclGroupStart: %w", err)
		}
		var first error
		for _, q := range g.ops {
			h := handles[slices.Index(streams, q.s)]
			err := q.c.ctx.Locked(func() error { return q.call(q.c.h, h) })
			if err != nil && !errors.Is(err, ncclraw.ErrInProgress) && first == nil {
				first = fmt.Errorf("%s (rank %d): %w", q.op, q.c.rank, err)
			}
		}
		// After a failed call too: the group must end, and NCCL then drops its calls.
		if err := raw.groupEnd(); err != nil && !errors.Is(err, ncclraw.ErrInProgress) && first == nil {
			first = fmt.Errorf("ncclGroupEnd: %w", err)
		}
		if first != nil {
			return first
		}
		for _, c := range comms {
			if err := c.poll(nil); err != nil {
				return fmt.Errorf("rank %d: %w", c.rank, err)
			}
		}
		return nil
	})
}
