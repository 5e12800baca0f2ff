package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Options configure a pool. The zero value is one worker and no spare.
type Options struct {
	// Workers is the number of worker processes serving requests (default 1).
	Workers int
	// Spares is the number of processes kept started and set up, serving nothing,
	// that take the place of a worker a fault or a crash ended at once; a
	// replacement for the spare starts behind it. Worth it where a restart
	// (Stats.RestartTimes) is long beside the time a caller may wait.
	Spares int
	// MaxRestarts is how many processes the pool starts to replace ended workers and
	// spares within any RestartWindow (defaults: 10 in a minute). Beyond it the pool
	// starts none until the window passes, says so once through Logger
	// (Stats.Throttled), and Call fails with ErrRestartLimit while no worker is
	// left to take the request: a request that faults every worker it reaches ends
	// in errors, not in a loop of restarts.
	MaxRestarts   int
	RestartWindow time.Duration
	// Retries is how many more times a call marked Retry is sent, each time to
	// another worker, after a fault or a lost worker answered it (default 1).
	Retries int
	// StartTimeout bounds a process's start and Setup (default 1 minute): one not
	// ready by then is killed and counts as a failed start.
	StartTimeout time.Duration
	// Grace is how long Close lets the workers finish their requests and exit
	// before it kills them (default 10 s).
	Grace time.Duration
	// Env is added to the workers' environment ("KEY=value"), which is otherwise the
	// parent's. A worker runs the parent's executable (os.Executable) with the
	// parent's arguments; it never gets past Main.
	Env []string
	// Logger gets the pool's events: faults, lost workers, each restart and its
	// cost, the restart limit, cleanup errors (default slog.Default()).
	Logger *slog.Logger
}

// Stats is a snapshot of a pool.
type Stats struct {
	Workers  int   // processes serving requests
	Spares   int   // processes set up and waiting to take a worker's place
	Starting int   // processes starting or in Setup
	PIDs     []int // every worker process alive: serving, spare, starting or exiting
	InFlight int   // requests sent and not answered

	Served       int64 // requests a handler answered, with a result or its error
	Faulted      int64 // answers that were a fault (the request's own or its worker's), each attempt counted
	Faults       int64 // workers a fault ended
	Lost         int64 // workers that ended without being asked to (killed, crashed)
	LostRequests int64 // requests in flight on a worker that ended without answering them
	Retries      int64 // requests sent again after a fault or a lost worker (Retry)
	Refused      int64 // calls that got ErrRestartLimit

	Restarts int64 // processes started to replace an ended worker or spare
	// RestartTimes holds the last 64 restarts that became ready, oldest first.
	RestartTimes  []Restart
	StartFailures int64 // processes that failed Setup, exited or timed out before they were ready
	Throttled     bool  // the restart limit holds restarts back now

	// Exited counts the processes that exited when the pool stopped them, each after
	// Cleanup; LeftBytes is the memory of the cuda package's buffers they reported
	// still live then (0: all given back), and ExitErrors the Cleanup errors they
	// reported.
	Exited     int64
	LeftBytes  int64
	ExitErrors int64
}

// Restart is the cost of one restart, measured from the exec of the new process.
type Restart struct {
	PID    int
	Reason string    // what ended the process it replaces: "fault", "lost", "start failed"
	At     time.Time // when it was started
	// Start is the time until the worker's first message: the process's start, the
	// Go runtime's and the packages' initialization.
	Start time.Duration
	// Setup is the time Setup took in the worker: the CUDA context, module loads,
	// warm-up.
	Setup time.Duration
	// Ready is the whole cost: from the exec until the worker could serve.
	Ready time.Duration
}

// CallOption is an option of Call.
type CallOption func(*callConfig)

type callConfig struct{ retry bool }

// Retry marks a request as safe to run again: if its worker faults or dies before
// it answers, the pool sends it to another worker (Options.Retries times at most).
// Leave it off for a request that may have had an effect outside the worker, or
// that may be the one that faults (it would end one more worker).
func Retry() CallOption { return func(c *callConfig) { c.retry = true } }

// Pool is a supervised pool of worker processes: the program's own binary,
// started again as Options.Workers processes that serve Call's requests with the
// handlers of Handle. See the package documentation.
type Pool struct {
	opts Options
	log  *slog.Logger
	exe  string
	args []string
	env  []string

	nextID atomic.Uint64

	mu       sync.Mutex
	changed  chan struct{} // closed and made anew at every change of the processes
	procs    map[*proc]struct{}
	starting bool // Start waits for the first processes: no promotions, no restarts
	startErr error
	closed   bool
	killAll  bool   // Close's grace has passed
	cause    string // what ended the latest process: the next restart's reason
	restarts []time.Time
	resume   time.Time // when the restart limit lets the next restart start
	timer    *time.Timer
	st       Stats // the counters; the rest is read off procs

	spawnq    []*proc
	spawnWake chan struct{}
	spawnDone chan struct{}
	closeDone chan struct{}
	closeErr  error
}

// maxResends bounds how often one call is sent again after a worker took it
// without running it (a fault or a stop came first): each such answer means a
// worker ended, which the restart limit bounds too.
const maxResends = 16

// Start starts the worker processes and waits until each has run Setup, or ctx
// ends (then it stops them and returns ctx's error). ctx bounds only the start.
// The processes run the program's executable again with the environment variable
// that makes Main serve; the program's main must call Main first.
func Start(ctx context.Context, opts Options) (*Pool, error) {
	if _, ok := os.LookupEnv(envFD); ok {
		// Without this, a program that forgot Main would start pools recursively.
		return nil, errors.New("worker: Start in a worker process: the program's main must call worker.Main first")
	}
	if opts.Workers < 0 || opts.Spares < 0 || opts.MaxRestarts < 0 || opts.Retries < 0 {
		return nil, fmt.Errorf("worker: negative option in %+v", opts)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if opts.Workers == 0 {
		opts.Workers = 1
	}
	if opts.MaxRestarts == 0 {
		opts.MaxRestarts = 10
	}
	if opts.Retries == 0 {
		opts.Retries = 1
	}
	def(&opts.RestartWindow, time.Minute)
	def(&opts.StartTimeout, time.Minute)
	def(&opts.Grace, 10*time.Second)
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("worker: the program's executable: %w", err)
	}
	p := &Pool{opts: opts, log: opts.Logger, exe: exe, args: os.Args[1:], env: workerEnv(opts.Env),
		changed: make(chan struct{}), procs: make(map[*proc]struct{}), starting: true,
		spawnWake: make(chan struct{}, 1), spawnDone: make(chan struct{}), closeDone: make(chan struct{})}
	if p.log == nil {
		p.log = slog.Default()
	}
	go p.spawnLoop()
	t0 := time.Now()
	p.mu.Lock()
	for range opts.Workers + opts.Spares {
		p.newProc("")
	}
	p.mu.Unlock()
	for {
		p.mu.Lock()
		err := p.startErr
		n := 0
		for w := range p.procs {
			if w.state == stateStarting {
				n++
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if err != nil {
			p.Close()
			return nil, err
		}
		if n == 0 {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p.Close()
			return nil, fmt.Errorf("worker: starting the pool: %w", ctx.Err())
		}
	}
	p.mu.Lock()
	p.starting = false
	p.settle()
	p.broadcast()
	p.mu.Unlock()
	p.log.Info("worker: pool started", "workers", opts.Workers, "spares", opts.Spares, "took", time.Since(t0))
	return p, nil
}

// workerEnv is the parent's environment with extra added and the worker's mark.
func workerEnv(extra []string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envFD+"=") })
	env = append(env, extra...)
	return append(env, envFD+"=3") // ExtraFiles[0]
}

// Call sends req to the handler registered as name in a worker and returns its
// answer. Errors: the handler's error as an *Error (with its text; a fault of the
// worker's CUDA context as KindFault, matching cuda.ErrFaulted and the driver's
// Result); a *LostError matching ErrWorkerLost if the worker process ended before it
// answered; ErrRestartLimit, ErrClosed, ErrUnknownHandler; ctx's error, promptly,
// when ctx ends first: the worker is told to cancel the handler's context, which
// carries ctx's deadline from the start. With Retry, a fault or a lost worker sends
// the request to another worker instead (Options.Retries times). A request a
// worker received but never started, because a fault or a stop came first, is
// always sent to another worker.
func (p *Pool) Call(ctx context.Context, name string, req []byte, opts ...CallOption) ([]byte, error) {
	var cfg callConfig
	for _, o := range opts {
		o(&cfg)
	}
	if lookup(name) == nil {
		return nil, fmt.Errorf("%w: %q (register it with Handle, in every process)", ErrUnknownHandler, name)
	}
	if len(req) > MaxPayload {
		return nil, fmt.Errorf("worker: %s: request of %d bytes is over MaxPayload", name, len(req))
	}
	var deadline int64
	if d, ok := ctx.Deadline(); ok {
		deadline = d.UnixNano()
	}
	retries := 0
	if cfg.retry {
		retries = p.opts.Retries
	}
	for resends := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id := p.nextID.Add(1)
		w, ch, err := p.dispatch(ctx, id)
		if err != nil {
			return nil, err
		}
		f := newFrame(frameRequest, id, 16+len(name)+len(req)).varint(deadline).str(name).raw(req)
		if err := w.send(f); err != nil {
			// The socket is closed: the worker ended and never read the request.
			p.forget(w, id)
			if resends++; resends > maxResends {
				return nil, &LostError{Handler: name, PID: w.pid, Cause: err.Error()}
			}
			continue
		}
		var r reply
		select {
		case r = <-ch:
		case <-ctx.Done():
			p.forget(w, id)
			go w.send(newFrame(frameCancel, id, 0))
			return nil, ctx.Err()
		}
		switch r.status {
		case replyOK:
			return r.payload, nil
		case replyNotRun:
			if resends++; resends <= maxResends {
				continue
			}
		case replyFault, replyLost:
			if retries > 0 {
				retries--
				p.mu.Lock()
				p.st.Retries++
				p.mu.Unlock()
				continue
			}
		}
		return nil, r.err(name, w.pid)
	}
}

// dispatch picks the serving worker with the fewest requests in flight (ties at
// random, by map order) and registers request id on it, waiting while none serves.
func (p *Pool) dispatch(ctx context.Context, id uint64) (*proc, chan reply, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, ErrClosed
		}
		var best *proc
		coming := false
		for w := range p.procs {
			switch w.state {
			case stateActive:
				if best == nil || len(w.pending) < len(best.pending) {
					best = w
				}
			case stateSpare, stateStarting:
				coming = true
			}
		}
		if best != nil {
			ch := make(chan reply, 1)
			best.pending[id] = ch
			p.mu.Unlock()
			return best, ch, nil
		}
		if p.st.Throttled && !coming {
			p.st.Refused++
			err := fmt.Errorf("%w: %d restarts within %v, no worker left; the next restart starts at %s",
				ErrRestartLimit, len(p.restarts), p.opts.RestartWindow, p.resume.Format(time.TimeOnly))
			p.mu.Unlock()
			return nil, nil, err
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// forget drops request id from w: its answer, if any comes, is discarded.
func (p *Pool) forget(w *proc, id uint64) {
	p.mu.Lock()
	delete(w.pending, id)
	p.mu.Unlock()
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	st.RestartTimes = slices.Clone(p.st.RestartTimes)
	for w := range p.procs {
		switch w.state {
		case stateActive:
			st.Workers++
		case stateSpare:
			st.Spares++
		case stateStarting:
			st.Starting++
		}
		if w.pid != 0 {
			st.PIDs = append(st.PIDs, w.pid)
		}
		st.InFlight += len(w.pending)
	}
	slices.Sort(st.PIDs)
	return st
}

// Close stops the pool: Call fails with ErrClosed from now on, the workers finish
// the requests in flight, clean up and exit; those still running after
// Options.Grace are killed (their requests get a *LostError), and Close says how
// many. It returns once every worker process has ended.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone
		return p.closeErr
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	var stops []*proc
	for w := range p.procs {
		w.stopping = true
		if w.conn != nil {
			stops = append(stops, w)
		}
	}
	p.broadcast()
	p.mu.Unlock()
	for _, w := range stops {
		w.send(newFrame(frameStop, 0, 0))
	}
	grace := time.NewTimer(p.opts.Grace)
	defer grace.Stop()
	killed := 0
	for {
		p.mu.Lock()
		n, changed := len(p.procs), p.changed
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-changed:
		case <-grace.C:
			p.mu.Lock()
			p.killAll = true
			for w := range p.procs {
				if w.cmd != nil {
					killed++
					w.kill()
				}
			}
			p.mu.Unlock()
		}
	}
	close(p.spawnWake)
	<-p.spawnDone
	if killed > 0 {
		p.closeErr = fmt.Errorf("worker: %d worker process(es) had not exited %v after Close and were killed", killed, p.opts.Grace)
		p.log.Warn(p.closeErr.Error())
	}
	close(p.closeDone)
	return p.closeErr
}

func (p *Pool) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// settle keeps Workers processes serving and Spares waiting (p.mu held): it
// promotes spares in the place of ended workers and starts replacements, as many
// as the restart limit allows, arming a timer for the rest.
func (p *Pool) settle() {
	if p.closed || p.starting {
		return
	}
	var active, waiting, starting int
	var spares []*proc
	for w := range p.procs {
		switch w.state {
		case stateActive:
			active++
		case stateSpare:
			spares = append(spares, w)
			waiting++
		case stateStarting:
			starting++
		}
	}
	for ; active < p.opts.Workers && len(spares) > 0; active, waiting = active+1, waiting-1 {
		spares[0].state = stateActive
		spares = spares[1:]
	}
	owed := p.opts.Workers + p.opts.Spares - active - waiting - starting
	if owed <= 0 {
		return
	}
	now := time.Now()
	for len(p.restarts) > 0 && now.Sub(p.restarts[0]) >= p.opts.RestartWindow {
		p.restarts = p.restarts[1:]
	}
	for ; owed > 0; owed-- {
		if len(p.restarts) >= p.opts.MaxRestarts {
			p.throttle(now)
			return
		}
		p.restarts = append(p.restarts, now)
		p.st.Restarts++
		p.newProc(cmp.Or(p.cause, "replacement"))
	}
	if p.st.Throttled {
		p.st.Throttled = false
		p.log.Info("worker: restarts resumed")
	}
}

// throttle holds restarts back until the oldest in the window leaves it (p.mu held).
func (p *Pool) throttle(now time.Time) {
	p.resume = p.restarts[0].Add(p.opts.RestartWindow)
	if !p.st.Throttled {
		p.st.Throttled = true
		p.log.Error("worker: restart limit reached; no worker process is started until the window passes",
			"restarts", len(p.restarts), "window", p.opts.RestartWindow, "resume", p.resume)
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(p.resume.Sub(now), func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = nil
			p.settle()
			p.broadcast()
		})
	}
}

// reply is an answer to a request, as Call gets it.
type reply struct {
	status  byte // replyOK, ... or replyLost
	payload []byte
	kind    ErrorKind
	msg     string // error text; for replyLost how the process ended
	fault   *cuda.FaultError
}

// replyLost answers the requests of a worker that ended without answering.
const replyLost = 255

func (r *reply) err(name string, pid int) error {
	switch r.status {
	case replyLost:
		return &LostError{Handler: name, PID: pid, Cause: r.msg}
	case replyFault:
		return &Error{Handler: name, PID: pid, Kind: KindFault, Msg: r.msg, Fault: r.fault}
	case replyNotRun:
		return &LostError{Handler: name, PID: pid, Cause: "no worker ran the request: each one it reached was ending"}
	}
	return &Error{Handler: name, PID: pid, Kind: r.kind, Msg: r.msg}
}

func decodeReply(d *decoder) reply {
	r := reply{status: d.byte()}
	switch r.status {
	case replyOK:
		r.payload = d.rest()
	case replyError:
		r.kind = ErrorKind(d.byte())
		r.msg = d.str()
	case replyFault:
		dev, res, op, stream := d.varint(), d.varint(), d.str(), d.uvarint()
		r.msg = d.str()
		r.fault = &cuda.FaultError{Device: cuda.Device(dev), Result: cudaraw.Result(res), Op: op, Stream: cudaraw.CUstream(stream)}
	case replyNotRun:
	default:
		d.err = errFrame
	}
	return r
}
