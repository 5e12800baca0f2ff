package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/resource"
)

// envFD marks a worker process: it holds the number of the file descriptor of the
// worker's socket to the parent.
const envFD = "GOCUDA_WORKER_FD"

// Exit statuses of a worker process.
const (
	exitClean       = 0 // stopped by the parent
	exitSetup       = 1 // Setup failed
	exitParentGone  = 2 // the socket closed without a stop
	exitFaulted     = 3 // a fault ended its context
	exitBadProtocol = 4
)

// faultStopWait is how long a faulted worker waits for the parent's stop before it
// exits anyway: the stop tells it that no request is still on its way.
const faultStopWait = 5 * time.Second

// Handler serves one kind of request in a worker process. ctx is canceled when the
// caller's context is, and carries its deadline.
type Handler func(ctx context.Context, req []byte) ([]byte, error)

var reg struct {
	sync.RWMutex
	handlers map[string]Handler
	setup    func(context.Context) error
	cleanup  func() error
}

// Handle registers h under name. Every process of the program runs the same
// binary, as parent or as worker, so register from an init function or before
// Main, never in one kind of process only. A name registered twice panics.
func Handle(name string, h Handler) {
	if name == "" || h == nil {
		panic("worker: Handle needs a name and a handler")
	}
	reg.Lock()
	defer reg.Unlock()
	if reg.handlers == nil {
		reg.handlers = make(map[string]Handler)
	}
	if _, dup := reg.handlers[name]; dup {
		panic("worker: handler " + strconv.Quote(name) + " registered twice")
	}
	reg.handlers[name] = h
}

// Setup registers what a worker runs once before it serves (setup: make the CUDA
// context current, load modules, warm up) and once after its last request when the
// pool stops it (cleanup: close what setup made, so that the memory the worker
// reports at exit, after cleanup and resource.Reclaim, is what its handlers
// leaked). Either may be nil. Setup's time is
// part of a restart's measured cost (Restart.Setup); an error of setup fails the
// worker's start, and cleanup's error is reported by the pool (Stats.ExitErrors, the
// logger). A worker that a fault ended runs no cleanup: its process ends at once.
// Call it as Handle, before Main.
func Setup(setup func(ctx context.Context) error, cleanup func() error) {
	reg.Lock()
	defer reg.Unlock()
	reg.setup, reg.cleanup = setup, cleanup
}

func lookup(name string) Handler {
	reg.RLock()
	defer reg.RUnlock()
	return reg.handlers[name]
}

// Main runs the process as a worker if the pool started it as one: it serves
// requests until the pool stops it, and exits the process. In any other process it
// returns at once. Call it first thing in main (and in TestMain, before the tests
// run), after the handlers are registered.
func Main() {
	v, ok := os.LookupEnv(envFD)
	if !ok {
		return
	}
	// The worker's own children (a pool of its own, a tool it runs) are no workers.
	os.Unsetenv(envFD)
	os.Exit(serve(v))
}

// server is a worker's state.
type server struct {
	conn net.Conn
	wmu  sync.Mutex // one frame at a time

	mu       sync.Mutex
	inflight map[uint64]context.CancelFunc // requests not yet answered
	stopping bool                          // stop received: requests are answered not-run
	fault    *cuda.FaultError              // the fault that ended the worker

	wg       sync.WaitGroup // handler goroutines
	stop     chan struct{}  // closed on the parent's stop
	gone     chan struct{}  // closed when the socket ends
	faulted  chan struct{}  // closed on the first fault
	cancelAt context.CancelFunc
}

func serve(fdText string) int {
	fd, err := strconv.Atoi(fdText)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %s=%q: %v\n", envFD, fdText, err)
		return exitBadProtocol
	}
	f := os.NewFile(uintptr(fd), "worker-socket")
	conn, err := net.FileConn(f) // a close-on-exec copy: the worker's children do not hold the socket
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: socket: %v\n", err)
		return exitBadProtocol
	}
	base, cancel := context.WithCancel(context.Background())
	s := &server{conn: conn, inflight: make(map[uint64]context.CancelFunc),
		stop: make(chan struct{}), gone: make(chan struct{}), faulted: make(chan struct{}), cancelAt: cancel}
	s.write(newFrame(frameHello, uint64(os.Getpid()), 0))

	reg.RLock()
	setup, cleanup := reg.setup, reg.cleanup
	reg.RUnlock()
	t0 := time.Now()
	err = runSetup(base, setup)
	s.write(newFrame(frameReady, 0, 16).uvarint(uint64(time.Since(t0))).str(errText(err)))
	if err != nil {
		return exitSetup
	}

	go s.read(base)
	select {
	case <-s.gone:
		return exitParentGone
	case <-s.faulted:
		s.awaitStop()
		return exitFaulted
	case <-s.stop:
	}
	s.wg.Wait()
	if s.faultErr() != nil {
		return exitFaulted
	}
	var cerr error
	if cleanup != nil {
		cerr = protect(cleanup)
	}
	// The cuda package keeps buffers for later copies (bounce buffers, staging
	// rings) until Reclaim: what is live after it is what the worker leaked.
	if _, err := resource.Reclaim(); err != nil {
		cerr = errors.Join(cerr, err)
	}
	s.write(newFrame(frameBye, 0, 16).varint(liveBytes()).str(errText(cerr)))
	return exitClean
}

func runSetup(ctx context.Context, setup func(context.Context) error) error {
	if setup == nil {
		return nil
	}
	return protect(func() error { return setup(ctx) })
}

// protect runs f, turning a panic into an error.
func protect(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	return f()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	if s := err.Error(); s != "" {
		return s
	}
	return "error"
}

// awaitStop waits, after a fault, for the parent's stop (no request is on its way
// any more), the socket's end, or faultStopWait.
func (s *server) awaitStop() {
	t := time.NewTimer(faultStopWait)
	defer t.Stop()
	select {
	case <-s.stop:
	case <-s.gone:
	case <-t.C:
	}
}

// liveBytes is the memory of the cuda package's live buffers, all kinds, in all
// contexts of the process.
func liveBytes() int64 {
	st, _ := cuda.MemoryStatus()
	var n int64
	for _, c := range st.Contexts {
		for _, k := range c.Kinds {
			n += k.Bytes
		}
	}
	return n
}

func (s *server) write(f frame) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// An error means the parent is gone; the reader sees it too and ends the worker.
	_, _ = s.conn.Write(f.bytes())
}

func (s *server) faultErr() *cuda.FaultError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

// read serves the parent's frames until the socket ends.
func (s *server) read(base context.Context) {
	r := bufio.NewReaderSize(s.conn, 64<<10)
	for {
		t, id, body, err := readFrame(r)
		if err != nil {
			s.cancelAt()
			close(s.gone)
			return
		}
		switch t {
		case frameRequest:
			d := decoder{b: body}
			deadline := d.varint()
			name := d.str()
			req := d.rest()
			if d.err != nil {
				s.cancelAt()
				close(s.gone)
				return
			}
			s.start(base, id, deadline, name, req)
		case frameCancel:
			s.mu.Lock()
			cancel := s.inflight[id]
			s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		case frameStop:
			s.mu.Lock()
			already := s.stopping
			s.stopping = true
			s.mu.Unlock()
			if !already {
				close(s.stop)
			}
		}
	}
}

// start runs a request on a goroutine of its own.
func (s *server) start(base context.Context, id uint64, deadline int64, name string, req []byte) {
	s.mu.Lock()
	if s.stopping || s.fault != nil {
		s.mu.Unlock()
		s.write(newFrame(frameReply, id, 1).raw([]byte{replyNotRun}))
		return
	}
	ctx, cancel := context.WithCancel(base)
	if deadline != 0 {
		ctx, cancel = context.WithDeadline(base, time.Unix(0, deadline))
	}
	s.inflight[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		out, kind, err := s.call(ctx, name, req)
		s.finish(id, name, out, kind, err)
	}()
}

// call runs the handler, recovering a panic.
func (s *server) call(ctx context.Context, name string, req []byte) (out []byte, kind ErrorKind, err error) {
	h := lookup(name)
	if h == nil {
		return nil, KindUnknownHandler, fmt.Errorf("%w: %q", ErrUnknownHandler, name)
	}
	defer func() {
		if v := recover(); v != nil {
			out, kind, err = nil, KindPanic, fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	out, err = h(ctx, req)
	switch {
	case err == nil:
		if len(out) > MaxPayload {
			return nil, KindHandler, fmt.Errorf("worker: reply of %d bytes is over MaxPayload", len(out))
		}
	case errors.Is(err, context.Canceled):
		kind = KindCanceled
	case errors.Is(err, context.DeadlineExceeded):
		kind = KindDeadline
	}
	return out, kind, err
}

// finish answers a request, unless a fault answered it already. A fault answers
// this request with its own error and every other one in flight with the fault, and
// ends the worker: it takes no more requests.
func (s *server) finish(id uint64, name string, out []byte, kind ErrorKind, err error) {
	if fe := faultOf(err, name); fe != nil {
		s.poison(id, err, fe)
		return
	}
	s.mu.Lock()
	cancel, ok := s.inflight[id]
	delete(s.inflight, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	cancel()
	if err != nil {
		msg := errText(err)
		s.write(newFrame(frameReply, id, 12+len(msg)).raw([]byte{replyError, byte(kind)}).str(msg))
		return
	}
	s.write(newFrame(frameReply, id, 1+len(out)).raw([]byte{replyOK}).raw(out))
}

// faultOf returns the fault that err is or carries, or nil. A sticky error that
// reached the handler as the driver's Result, not typed by the cuda package, is as
// much a fault: the process's use of the device is as lost. It has no context to
// name, so its Device is -1 and its Op the handler.
func faultOf(err error, handler string) *cuda.FaultError {
	var fe *cuda.FaultError
	if errors.As(err, &fe) {
		return fe
	}
	if r, ok := cuda.Sticky(err); ok {
		return &cuda.FaultError{Device: -1, Result: r, Op: "handler " + strconv.Quote(handler)}
	}
	return nil
}

func (s *server) poison(id uint64, err error, fe *cuda.FaultError) {
	s.mu.Lock()
	first := s.fault == nil
	if first {
		s.fault = fe
	}
	inflight := s.inflight
	s.inflight = make(map[uint64]context.CancelFunc)
	s.mu.Unlock()
	if cancel, ok := inflight[id]; ok {
		delete(inflight, id)
		cancel()
		s.write(faultReply(id, fe, errText(err)))
	}
	for other, cancel := range inflight {
		cancel()
		s.write(faultReply(other, fe, "the worker's CUDA context faulted while the request ran: "+fe.Error()))
	}
	if first {
		close(s.faulted)
	}
}

func faultReply(id uint64, fe *cuda.FaultError, msg string) frame {
	return newFrame(frameReply, id, 32+len(fe.Op)+len(msg)).raw([]byte{replyFault}).
		varint(int64(fe.Device)).varint(int64(fe.Result)).str(fe.Op).uvarint(uint64(fe.Stream)).str(msg)
}
