package worker

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

type procState uint8

const (
	stateStarting procState = iota // started, Setup not done
	stateSpare                     // set up, serving nothing
	stateActive                    // serving
	stateDraining                  // faulted or stopping: takes no requests, exits
)

// proc is one worker process. Its fields are the pool's (p.mu), except conn and
// wmu, and what launch sets before it publishes the process.
type proc struct {
	p      *Pool
	reason string // what ended the process it replaces ("": one of the first)
	state  procState

	cmd     *exec.Cmd
	pid     int
	conn    net.Conn
	wmu     sync.Mutex // one frame at a time
	timer   *time.Timer
	startAt time.Time
	helloAt time.Time

	pending  map[uint64]chan reply // requests sent, not answered
	failed   string                // why Setup failed
	timedOut bool                  // not ready within StartTimeout: killed
	faulted  bool
	stopping bool // Close stopped it
	killed   bool
	bye      bool  // it said goodbye, with:
	live     int64 // its live buffer bytes
	exitErr  string
}

// newProc queues a process to be started by the spawner (p.mu held).
func (p *Pool) newProc(reason string) {
	w := &proc{p: p, reason: reason, pending: make(map[uint64]chan reply)}
	p.procs[w] = struct{}{}
	p.spawnq = append(p.spawnq, w)
	select {
	case p.spawnWake <- struct{}{}:
	default:
	}
}

// spawnLoop starts the queued processes from one goroutine locked to its thread:
// on Linux a worker gets SIGKILL when the thread that forked it exits
// (Pdeathsig), which a thread of Go's pool may do at any time, this one only when
// the pool is closed.
func (p *Pool) spawnLoop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.spawnDone)
	for range p.spawnWake {
		for {
			p.mu.Lock()
			if len(p.spawnq) == 0 {
				p.mu.Unlock()
				break
			}
			w := p.spawnq[0]
			p.spawnq = p.spawnq[1:]
			if p.closed {
				delete(p.procs, w)
				p.broadcast()
				p.mu.Unlock()
				continue
			}
			p.mu.Unlock()
			p.launch(w)
		}
	}
}

// launch starts w's process and its reader.
func (p *Pool) launch(w *proc) {
	var cmd *exec.Cmd
	conn, child, err := socketPair()
	t0 := time.Now()
	if err == nil {
		cmd = exec.Command(p.exe, p.args...)
		cmd.Env = p.env
		cmd.ExtraFiles = []*os.File{child}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = procAttr()
		err = cmd.Start()
		child.Close()
		if err != nil {
			conn.Close()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		delete(p.procs, w)
		p.st.StartFailures++
		p.cause = "start failed"
		err = fmt.Errorf("worker: starting a worker process: %w", err)
		p.log.Error(err.Error())
		if p.starting && p.startErr == nil {
			p.startErr = err
		}
		p.settle()
		p.broadcast()
		return
	}
	w.cmd, w.pid, w.conn, w.startAt = cmd, cmd.Process.Pid, conn, t0
	w.timer = time.AfterFunc(p.opts.StartTimeout, func() { p.startTimeout(w) })
	if p.killAll {
		w.kill()
	} else if p.closed {
		go w.send(newFrame(frameStop, 0, 0)) // Close saw no socket to send it on
	}
	go p.read(w)
}

func socketPair() (net.Conn, *os.File, error) {
	// Close-on-exec from the start (ForkLock): a process that another goroutine
	// forks meanwhile must not inherit either end.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	pf := os.NewFile(uintptr(fds[0]), "worker-parent")
	conn, err := net.FileConn(pf)
	pf.Close()
	child := os.NewFile(uintptr(fds[1]), "worker-child")
	if err != nil {
		child.Close()
		return nil, nil, err
	}
	return conn, child, nil
}

func (w *proc) send(f frame) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.conn.Write(f.bytes())
	return err
}

// kill kills w's process (p.mu held); its reader sees the end.
func (w *proc) kill() {
	w.killed = true
	_ = w.cmd.Process.Kill()
}

func (p *Pool) startTimeout(w *proc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.state == stateStarting && !w.killed {
		w.timedOut = true
		w.kill()
	}
}

// read handles w's frames until its socket ends, then waits for the process.
func (p *Pool) read(w *proc) {
	r := bufio.NewReaderSize(w.conn, 64<<10)
	for {
		t, id, body, err := readFrame(r)
		if err != nil {
			break
		}
		if !p.frame(w, t, id, body) {
			p.log.Error("worker: malformed frame from a worker; killing it", "pid", w.pid, "type", t)
			p.mu.Lock()
			w.kill()
			p.mu.Unlock()
			break
		}
	}
	w.conn.Close()
	err := w.cmd.Wait()
	p.exited(w, err)
}

// frame handles one frame of w and reports whether it was well formed.
func (p *Pool) frame(w *proc, t frameType, id uint64, body []byte) bool {
	d := decoder{b: body}
	switch t {
	case frameHello:
		p.mu.Lock()
		w.helloAt = time.Now()
		p.mu.Unlock()
	case frameReady:
		setup, msg := time.Duration(d.uvarint()), d.str()
		if d.err != nil {
			return false
		}
		p.ready(w, setup, msg)
	case frameReply:
		r := decodeReply(&d)
		if d.err != nil {
			return false
		}
		p.reply(w, id, r)
	case frameBye:
		live, msg := d.varint(), d.str()
		if d.err != nil {
			return false
		}
		p.mu.Lock()
		w.bye, w.live, w.exitErr = true, live, msg
		p.mu.Unlock()
	default:
		return false
	}
	return true
}

// ready records the end of w's Setup: it serves, or waits as a spare.
func (p *Pool) ready(w *proc, setup time.Duration, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg != "" {
		w.failed = "setup: " + msg // it exits: exited counts the failure
		return
	}
	w.timer.Stop()
	if w.state != stateStarting || w.stopping {
		return
	}
	w.state = stateSpare
	if w.reason != "" {
		now := time.Now()
		r := Restart{PID: w.pid, Reason: w.reason, At: w.startAt, Setup: setup, Ready: now.Sub(w.startAt)}
		if !w.helloAt.IsZero() {
			r.Start = w.helloAt.Sub(w.startAt)
		}
		if len(p.st.RestartTimes) == 64 {
			p.st.RestartTimes = p.st.RestartTimes[1:]
		}
		p.st.RestartTimes = append(p.st.RestartTimes, r)
		p.log.Info("worker: restarted", "pid", r.PID, "reason", r.Reason, "ready", r.Ready, "start", r.Start, "setup", r.Setup)
	}
	p.settle()
	p.broadcast()
}

// reply hands an answer to its caller. The first fault marks w draining, starts
// its replacement and tells it to stop: it exits once it knows no request is on
// its way.
func (p *Pool) reply(w *proc, id uint64, r reply) {
	p.mu.Lock()
	ch := w.pending[id]
	delete(w.pending, id)
	stop := false
	switch r.status {
	case replyOK, replyError:
		p.st.Served++
	case replyNotRun:
		// The worker faulted or stops: it takes no more requests. Its fault's
		// answer, which replaces it, may come after this one.
		if w.state == stateActive {
			w.state = stateDraining
		}
	case replyFault:
		p.st.Faulted++
		if !w.faulted {
			w.faulted, stop = true, true
			p.st.Faults++
			w.state = stateDraining
			p.cause = "fault"
			p.log.Warn("worker: a fault ended the worker's CUDA context; replacing it", "pid", w.pid,
				"error", r.fault.Result.Error(), "op", r.fault.Op, "inflight", len(w.pending))
			p.settle()
			p.broadcast()
		}
	}
	p.mu.Unlock()
	if ch != nil {
		ch <- r
	}
	if stop {
		w.send(newFrame(frameStop, 0, 0))
	}
}

// exited accounts for the end of w's process (err: cmd.Wait's) and fails the
// requests it left unanswered.
func (p *Pool) exited(w *proc, err error) {
	cause := "exited"
	if err != nil {
		cause = err.Error()
	}
	p.mu.Lock()
	delete(p.procs, w)
	w.timer.Stop()
	pending := w.pending
	w.pending = nil
	switch {
	case w.faulted: // replaced when the fault was seen
	case w.stopping:
		switch {
		case w.bye:
			p.st.Exited++
			p.st.LeftBytes += w.live
			if w.live != 0 {
				p.log.Warn("worker: a worker exited with cuda buffers still live", "pid", w.pid, "bytes", w.live)
			}
			if w.exitErr != "" {
				p.st.ExitErrors++
				p.log.Error("worker: cleanup failed", "pid", w.pid, "error", w.exitErr)
			}
		case !w.killed:
			p.log.Warn("worker: a stopped worker ended without cleaning up", "pid", w.pid, "how", cause)
		}
	case w.state == stateStarting:
		p.st.StartFailures++
		why := w.failed
		switch {
		case w.timedOut:
			why = fmt.Sprintf("not ready within %v", p.opts.StartTimeout)
		case why == "":
			why = "ended before it was ready: " + cause
		}
		p.log.Error("worker: a worker failed to start", "pid", w.pid, "why", why)
		if p.starting && p.startErr == nil {
			p.startErr = fmt.Errorf("worker: starting worker process %d: %s", w.pid, why)
		}
		p.cause = "start failed"
	default:
		p.st.Lost++
		p.cause = "lost"
		p.log.Warn("worker: a worker process ended unasked; replacing it", "pid", w.pid, "how", cause, "inflight", len(pending))
	}
	p.st.LostRequests += int64(len(pending))
	p.settle()
	p.broadcast()
	p.mu.Unlock()
	for _, ch := range pending {
		ch <- reply{status: replyLost, msg: cause}
	}
}
