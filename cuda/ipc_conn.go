package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// The IPC connection: a SOCK_SEQPACKET Unix socket, one fixed-size message per
// packet. The exporter's first message carries the pool's file descriptor
// (SCM_RIGHTS); then each buffer message carries the pointer's export data and an
// interprocess event recorded after the buffer's writes, and each release message
// back an event recorded after the importer's uses and its free. An ack tells the
// sender of an event that the receiver queued its wait, so that the event may be
// recorded again.
//
// A connection ends in order (goodbye): the side that ends it stops writing
// (shutdown SHUT_WR); the peer's reader, reading the end, stops opening this side's
// events and ends its own writing; this side's reader, reading that, knows the peer
// is done with its events, which it destroys. A peer that died ends both at once.
// The importer answers the exporter's goodbye with a bye (it opens no more of the
// exporter's events) and ends its writing only once it gave back every buffer it
// holds: the exporter reads their releases until then, so that no buffer is freed
// while the importer holds it.

const (
	msgHello   = 1 // exporter → importer: the pool's descriptor (SCM_RIGHTS) and device
	msgBuffer  = 2 // exporter → importer: a buffer
	msgRelease = 3 // importer → exporter: a buffer given back
	msgAck     = 4 // either way: the wait for event ev is queued
	msgRefused = 5 // exporter → refused peer: why (text)
	msgBye     = 6 // importer → exporter: the exporter's goodbye read; its events are not opened again
	msgSize    = 160
)

// msg is the wire format: type [0], event index [4:8], id [8:16], size [16:24],
// pointer export data [32:96], event handle [96:160] (or the refusal's text from 8).
type msg [msgSize]byte

func (m *msg) kind() byte   { return m[0] }
func (m *msg) ev() uint32   { return binary.LittleEndian.Uint32(m[4:]) }
func (m *msg) id() uint64   { return binary.LittleEndian.Uint64(m[8:]) }
func (m *msg) size() uint64 { return binary.LittleEndian.Uint64(m[16:]) }
func (m *msg) export() *cudaraw.CUmemPoolPtrExportData {
	return (*cudaraw.CUmemPoolPtrExportData)(unsafe.Pointer(&m[32]))
}
func (m *msg) handle() *cudaraw.CUipcEventHandle {
	return (*cudaraw.CUipcEventHandle)(unsafe.Pointer(&m[96]))
}

func newMsg(kind byte, ev uint32, id, size uint64) *msg {
	m := new(msg)
	m[0] = kind
	binary.LittleEndian.PutUint32(m[4:], ev)
	binary.LittleEndian.PutUint64(m[8:], id)
	binary.LittleEndian.PutUint64(m[16:], size)
	return m
}

// IPCPeers says which processes may import a SharedPool: a peer (identified by the
// kernel, SO_PEERCRED) is allowed when its user is among UIDs (empty: the exporter's
// own user only) and, if PIDs is not empty, its process among PIDs.
type IPCPeers struct {
	PIDs []int
	UIDs []int
	// Logger receives the refusals (nil: slog.Default()).
	Logger *slog.Logger
}

func (a *IPCPeers) allows(cred *syscall.Ucred) error {
	uids := a.UIDs
	if len(uids) == 0 {
		uids = []int{os.Getuid()}
	}
	if !slices.Contains(uids, int(cred.Uid)) {
		return fmt.Errorf("uid %d not allowed", cred.Uid)
	}
	if len(a.PIDs) > 0 && !slices.Contains(a.PIDs, int(cred.Pid)) {
		return fmt.Errorf("pid %d not allowed", cred.Pid)
	}
	return nil
}

// IPCListener waits for the one importer of a SharedPool on a Unix socket created
// owner-only (mode 0600, in a directory of mode 0700). Every connection is checked
// against the allowed peers; refused ones, and any connection after the importer's,
// are logged and closed. Safe for concurrent use.
type IPCListener struct {
	pool  *SharedPool
	peers IPCPeers
	ln    *net.UnixListener
	path  string
	got   chan *net.UnixConn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// Listen creates the socket path (its directory is created with mode 0700 if it
// does not exist, and must otherwise be the caller's own with mode 0700) and waits
// there for the pool's importer. An existing socket at path is replaced.
func (p *SharedPool) Listen(path string, peers IPCPeers) (*IPCListener, error) {
	if p == nil || p.ctx == nil {
		return nil, fmt.Errorf("%w: nil shared pool", ErrInvalidArgument)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cuda: IPC socket directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cuda: IPC socket directory: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o700 || !ok || int(sys.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%w: IPC socket directory %s must be the caller's own with mode 0700 (it is %v)", ErrInvalidArgument, dir, st.Mode().Perm())
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("cuda: IPC socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("cuda: IPC socket: %w", err)
	}
	if peers.Logger == nil {
		peers.Logger = slog.Default()
	}
	l := &IPCListener{pool: p, peers: peers, ln: ln, path: path, got: make(chan *net.UnixConn, 1), done: make(chan struct{})}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// serve accepts connections until Close: the first allowed one goes to Accept, the
// others are refused.
func (l *IPCListener) serve() {
	defer l.wg.Done()
	for {
		conn, err := l.ln.AcceptUnix()
		if err != nil {
			return
		}
		cred, err := peerCred(conn)
		if err == nil {
			err = l.peers.allows(cred)
		}
		if err == nil && !l.pool.claim() {
			err = errors.New("the pool is imported already")
		}
		if err != nil {
			pid, uid := -1, -1
			if cred != nil {
				pid, uid = int(cred.Pid), int(cred.Uid)
			}
			l.peers.Logger.Warn("cuda: IPC connection refused", "socket", l.path, "pid", pid, "uid", uid, "reason", err.Error())
			m := newMsg(msgRefused, 0, 0, 0)
			copy(m[8:], err.Error())
			_, _ = conn.Write(m[:])
			_ = conn.Close()
			continue
		}
		select {
		case l.got <- conn:
		case <-l.done:
			_ = conn.Close()
			return
		}
	}
}

func peerCred(conn *net.UnixConn) (*syscall.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// Accept waits for the importer, sends it the pool and returns the connection to
// send buffers on, or ctx's error.
func (l *IPCListener) Accept(ctx context.Context) (*IPCExport, error) {
	var conn *net.UnixConn
	select {
	case conn = <-l.got:
	case <-l.done:
		return nil, fmt.Errorf("cuda: IPC listener: %w", ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p := l.pool
	fd, err := p.exportFD()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	m := newMsg(msgHello, 0, uint64(p.ctx.dev), 0)
	_, _, err = conn.WriteMsgUnix(m[:], syscall.UnixRights(fd), nil)
	_ = syscall.Close(fd)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cuda: sending the shared pool: %w", err)
	}
	e := &IPCExport{pool: p, conn: conn, ev: ipcEvents{ctx: p.ctx}, leases: make(map[uint64]*IPCLease), gone: make(chan struct{}),
		bye: make(chan struct{})}
	e.reg = resource.ResourceFinalizer((*IPCExport).close, e, false, resource.Kind("IPC export"),
		resource.WithContext(nil), resource.CallerSkip(1))
	go e.read()
	return e, nil
}

// Close stops listening and removes the socket. An accepted IPCExport stays open.
func (l *IPCListener) Close() error {
	l.once.Do(func() { close(l.done) })
	err := l.ln.Close()
	l.wg.Wait()
	select {
	case conn := <-l.got:
		_ = conn.Close()
	default:
	}
	return err
}

// IPCExport is the exporter's side of a connection to the importer of a SharedPool.
// Send hands a buffer over; its IPCLease says when the importer gave it back. Safe
// for concurrent use: Close waits for the Sends in progress, and later ones fail
// with an error matching ErrClosed.
type IPCExport struct {
	pool *SharedPool
	conn *net.UnixConn
	ev   ipcEvents
	reg  *resource.Registration

	wmu    sync.Mutex   // one writer at a time
	life   sync.RWMutex // held (read) by Send, (write) by Close to wait for them
	mu     sync.Mutex
	closed bool // Close was called: Send fails with ErrClosed
	next   uint64
	leases map[uint64]*IPCLease
	err    error         // why the connection ended, once gone is closed
	gone   chan struct{} // closed when the importer is gone
	bye    chan struct{} // closed by the reader when it read the importer's bye or end
	done   bool          // the events are destroyed and the connection closed
}

// IPCLease is a buffer lent to the importer by IPCExport.Send. The buffer stays
// allocated while the importer holds it, whatever the exporter does: its Close then
// frees it only after the importer gave it back.
type IPCLease struct {
	e    *IPCExport
	m    *memBase
	done chan struct{}
	err  error
}

// Send hands b, a buffer of the pool, to the importer: the importer's uses wait on
// the device for the work queued so far that writes b (on any stream; s is the
// stream the exporter's event is recorded on, after the hand-off ordered it after
// those writes). The exporter keeps b: its later writes should wait for the lease
// (IPCLease.Wait), which orders them after the importer's reads. Sending a buffer
// that the importer still holds is allowed (it reads it twice).
func (e *IPCExport) Send(ctx context.Context, s *Stream, b *DeviceBuffer) (*IPCLease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := b.base()
	if err := m.check(); err != nil {
		return nil, err
	}
	notOwned := func() error {
		return fmt.Errorf("%w: sending a buffer that is not an allocation of the shared pool", ErrInvalidArgument)
	}
	if m.root != nil || m.ms != e.pool.ms {
		return nil, notOwned()
	}
	// Held until the message is written, so that Close destroys no event that a
	// Send records.
	e.life.RLock()
	defer e.life.RUnlock()
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, errs.Closed("cuda: IPC export")
	}
	if err := e.alive(); err != nil {
		return nil, err
	}
	evi, ev, h, err := e.ev.take()
	if err != nil {
		return nil, err
	}
	var data cudaraw.CUmemPoolPtrExportData
	// The buffer is held from here until the lease is taken, so that a concurrent
	// Close cannot free it first.
	c := m.ctx
	if err := c.enter(); err != nil {
		e.ev.give(evi)
		return nil, err
	}
	defer c.exit()
	if err := m.acquire(); err != nil {
		e.ev.give(evi)
		return nil, err
	}
	// Held, a buffer of the pool stays one (its free is postponed): a closed one
	// failed above with ErrClosed.
	if !e.pool.owns(m) {
		m.leave()
		e.ev.give(evi)
		return nil, notOwned()
	}
	err = c.Locked(func() error { return cudaraw.MemPoolExportPointer(&data, m.ptr) })
	if err == nil {
		err = Enqueue(s, func(ctx cudaraw.CUcontext, h cudaraw.CUstream) error { return cudaraw.EventRecordIn(ctx, ev, h) }, Reads(b))
	}
	if err != nil {
		m.leave()
		e.ev.give(evi)
		return nil, fmt.Errorf("cuda: sending a buffer: %w", err)
	}
	m.addLease()
	m.leave()
	l := &IPCLease{e: e, m: m, done: make(chan struct{})}
	e.mu.Lock()
	e.next++
	id := e.next
	e.leases[id] = l
	e.mu.Unlock()
	out := newMsg(msgBuffer, evi, id, uint64(m.size))
	*out.export() = data
	*out.handle() = *h
	if err := e.write(out); err != nil {
		// Never sent: the lease ends here (unless the reader, finding the peer
		// gone, ended it first).
		e.endLease(id, 0, nil, err)
		return nil, err
	}
	return l, nil
}

func (e *IPCExport) write(m *msg) error {
	e.wmu.Lock()
	_, err := e.conn.Write(m[:])
	e.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("cuda: IPC: %w: %v", ErrPeerGone, err)
	}
	return nil
}

func (e *IPCExport) alive() error {
	if chanClosed(e.gone) {
		return e.err
	}
	return nil
}

// ipcGoodbye bounds how long goodbye waits for the peer's answer.
const ipcGoodbye = 2 * time.Second

// goodbye ends this side's writing on conn, then waits, at most ipcGoodbye, for the
// peer's answer (answered is closed when this side's reader read it), so that the
// peer has stopped opening this side's events before they are destroyed.
func goodbye(conn *net.UnixConn, answered <-chan struct{}) {
	_ = conn.CloseWrite()
	t := time.NewTimer(ipcGoodbye)
	defer t.Stop()
	select {
	case <-answered:
	case <-t.C:
	}
}

// read handles the importer's messages until the connection ends; then every lease
// ends (the importer is gone: its process's work on the memory ended with it).
func (e *IPCExport) read() {
	var in msg
	var err error
	for {
		var n int
		n, err = e.conn.Read(in[:])
		if err != nil || n != msgSize {
			break
		}
		switch in.kind() {
		case msgRelease:
			ev, oerr := e.ev.open(in.ev(), in.handle())
			e.endLease(in.id(), ev, &in, oerr)
		case msgAck:
			e.ev.give(in.ev())
		case msgBye:
			if !chanClosed(e.bye) { // this reader alone closes it
				close(e.bye)
			}
		}
	}
	// The importer's events were opened here only: none is opened again, and the
	// importer may destroy them once it reads this side's end.
	e.ev.shutPeer()
	_ = e.conn.CloseWrite()
	if !chanClosed(e.bye) {
		close(e.bye)
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	e.mu.Lock()
	e.err = fmt.Errorf("cuda: IPC importer: %w", ErrPeerGone)
	if err != nil {
		e.err = fmt.Errorf("cuda: IPC importer: %w: %v", ErrPeerGone, err)
	}
	ids := make([]uint64, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	close(e.gone)
	e.mu.Unlock()
	for _, id := range ids {
		e.endLease(id, 0, nil, e.err)
	}
	e.finish()
}

// finish destroys the events and closes the connection once both Close was called
// and the reader ended (the importer gave back what it held, or went).
func (e *IPCExport) finish() {
	e.mu.Lock()
	last := e.closed && !e.done && chanClosed(e.gone) // gone is closed under mu
	e.done = e.done || last
	e.mu.Unlock()
	if last {
		e.ev.close()
		_ = e.conn.Close()
	}
}

// endLease ends lease id: with ev (the importer's event after its uses) the
// buffer's later uses and free wait for it on the device; the importer is told that
// it may record ev again.
func (e *IPCExport) endLease(id uint64, ev cudaraw.CUevent, in *msg, err error) {
	e.mu.Lock()
	l := e.leases[id]
	delete(e.leases, id)
	e.mu.Unlock()
	if l == nil {
		return
	}
	if ev != 0 {
		err = waitOn(l.m, ev, false)
		if err == nil {
			_ = e.write(newMsg(msgAck, in.ev(), 0, 0))
		}
	}
	// The exporter's event of the Send came back with the importer's ack.
	l.err = err
	if eerr := l.m.endLease(); l.err == nil {
		l.err = eerr
	}
	close(l.done)
}

// Wait waits until the importer gave the buffer back, and returns nil, or the error
// that ended the lease (matching ErrPeerGone if the importer went without giving it
// back), or ctx's error. When it returns nil, later uses of the buffer in this
// process wait on the device for the importer's.
func (l *IPCLease) Wait(ctx context.Context) error {
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the lease has ended (Wait then returns at once).
func (l *IPCLease) Done() <-chan struct{} { return l.done }

// Gone is closed when the importer has gone (closed the connection or died).
func (e *IPCExport) Gone() <-chan struct{} { return e.gone }

// Close ends the connection: Send fails with ErrClosed, the importer's Receive with
// ErrPeerGone. Buffers the importer still holds stay allocated until it gives them
// back (their leases end then) or goes; the connection ends in the background then.
func (e *IPCExport) Close() error {
	return closeError("cuda: IPC export", e.reg.Release())
}

func (e *IPCExport) close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.life.Lock() // the Sends in progress have written their messages
	e.life.Unlock()
	goodbye(e.conn, e.bye)
	e.ev.closeOwn()
	e.finish()
	return nil
}

// IPCImport is the importer's side of a connection to a SharedPool's exporter: it
// holds the imported pool, and Receive returns the buffers the exporter sends, as
// DeviceBuffers of the importer's context. Safe for concurrent use: a Receive
// concurrent with Close either returns a buffer (which Close frees with the others
// not yet closed) or fails with an error matching ErrClosed, as later ones do.
type IPCImport struct {
	ctx  *Context
	ms   *memState
	pool cudaraw.CUmemoryPool
	conn *net.UnixConn
	ev   ipcEvents
	reg  *resource.Registration

	gone chan struct{} // closed when the exporter is gone
	err  error         // why, once gone is closed

	// opening is held (read) by Receive while it opens and waits on the exporter's
	// event and imports the buffer, and by a release while it records and sends its
	// event; (write) by the reader when the exporter said goodbye, before it
	// answers (the exporter destroys its events then), and by Close, to wait for
	// those in progress.
	opening sync.RWMutex

	wmu    sync.Mutex
	mu     sync.Mutex
	closed bool                     // Close was called: Receive fails with ErrClosed
	queue  []msg                    // buffers sent and not yet received
	ready  chan struct{}            // a token: the queue may hold a buffer
	out    map[uint64]*DeviceBuffer // buffers received and not yet closed
	live   sync.WaitGroup           // imports not yet freed: the pool outlives them
	held   int                      // imports whose release is not yet written
	ended  bool                     // this side's writing ended
}

// DialIPC connects to the exporter listening at path and imports its pool into c
// (cuMemPoolImportFromShareableHandle). The error matches ErrPeerRefused if the
// exporter refused the connection.
func DialIPC(ctx context.Context, c *Context, path string) (*IPCImport, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ms, err := c.memory()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("cuda: IPC: connecting to %s: %w", path, err)
	}
	conn := nc.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	var hello msg
	oob := make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(hello[:], oob)
	stopped := stop()
	_ = conn.SetReadDeadline(time.Time{})
	fd := -1
	refused := err == nil && n == msgSize && hello.kind() == msgRefused
	if err == nil && !refused {
		fd, err = rightsFD(oob[:oobn])
	}
	fail := func(err error) (*IPCImport, error) {
		if fd >= 0 {
			_ = syscall.Close(fd)
		}
		_ = conn.Close()
		return nil, err
	}
	switch {
	case !stopped && ctx.Err() != nil:
		return fail(ctx.Err())
	case refused:
		return fail(fmt.Errorf("cuda: IPC: %w: %s", ErrPeerRefused, cstring(hello[8:])))
	case err != nil:
		return fail(fmt.Errorf("cuda: IPC: receiving the pool: %w", err))
	case n != msgSize || hello.kind() != msgHello:
		return fail(fmt.Errorf("cuda: IPC: %w: unexpected first message", ErrPeerGone))
	}
	im := &IPCImport{ctx: c, ms: ms, conn: conn, ev: ipcEvents{ctx: c}, gone: make(chan struct{}), ready: make(chan struct{}, 1),
		out: make(map[uint64]*DeviceBuffer)}
	err = c.Locked(func() error {
		h := hostPointer(cudaraw.CUdeviceptr(fd)) // the driver takes the descriptor as the pointer's value
		if err := cudaraw.MemPoolImportFromShareableHandle(&im.pool, h, cudaraw.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0); err != nil {
			return err
		}
		access := cudaraw.CUmemAccessDesc{Location: cudaraw.CUmemLocation{Type: cudaraw.CU_MEM_LOCATION_TYPE_DEVICE, Id: int32(c.dev)},
			Flags: cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE}
		var flags cudaraw.CUmemAccess_flags
		loc := access.Location
		if cudaraw.MemPoolGetAccess(&flags, im.pool, &loc) == nil && flags == cudaraw.CU_MEM_ACCESS_FLAGS_PROT_READWRITE {
			return nil
		}
		if err := cudaraw.MemPoolSetAccess(im.pool, &access, 1); err != nil {
			_ = cudaraw.MemPoolDestroy(im.pool)
			im.pool = 0
			return err
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("cuda: IPC: importing the pool: %w", err))
	}
	_ = syscall.Close(fd)
	im.reg = resource.ResourceFinalizer((*IPCImport).close, im, false, resource.Kind("IPC import"),
		resource.WithContext(nil), resource.CallerSkip(1))
	go im.read()
	return im, nil
}

func rightsFD(oob []byte) (int, error) {
	cms, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, err
	}
	for _, cm := range cms {
		fds, err := syscall.ParseUnixRights(&cm)
		if err == nil && len(fds) > 0 {
			for _, extra := range fds[1:] {
				_ = syscall.Close(extra)
			}
			return fds[0], nil
		}
	}
	return -1, errors.New("no file descriptor with the pool")
}

func cstring(b []byte) string {
	if i := slices.Index(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// read passes the exporter's messages on until the connection ends: buffers to
// Receive's queue (the reader never waits, so it reads the end as it comes), acks to
// the events. Then the exporter is gone.
func (im *IPCImport) read() {
	var m msg
	var err error
	for {
		var n int
		n, err = im.conn.Read(m[:])
		if err != nil || n != msgSize {
			break
		}
		switch m.kind() {
		case msgBuffer:
			im.mu.Lock()
			im.queue = append(im.queue, m)
			im.mu.Unlock()
			im.signal()
		case msgAck:
			im.ev.give(m.ev())
		}
	}
	// No Receive opens or waits on an exporter's event after this: the exporter may
	// destroy them once it reads the bye. This side's writing ends once the buffers
	// held are given back (their releases still go to the exporter).
	im.opening.Lock()
	im.ev.shutPeer()
	im.opening.Unlock()
	_ = im.write(newMsg(msgBye, 0, 0, 0))
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		im.err = fmt.Errorf("cuda: IPC exporter: %w", ErrPeerGone)
	} else {
		im.err = fmt.Errorf("cuda: IPC exporter: %w: %v", ErrPeerGone, err)
	}
	close(im.gone)
	im.endIfIdle(0)
}

// endIfIdle counts written releases off the imports held, and ends this side's
// writing once the exporter left and no release is still to be written.
func (im *IPCImport) endIfIdle(written int) {
	im.mu.Lock()
	im.held -= written
	end := im.held == 0 && !im.ended && chanClosed(im.gone)
	im.ended = im.ended || end
	im.mu.Unlock()
	if end {
		_ = im.conn.CloseWrite()
	}
}

// Receive waits for the exporter's next buffer and returns it as device memory of
// the importer's context: an ordinary DeviceBuffer (untyped, Len its size in
// bytes), whose uses on any stream wait on the device for the exporter's writes
// before the Send. Close gives it back: the exporter's later uses wait on the
// device for this process's uses, queued before the Close. Receive returns an error
// matching ErrPeerGone as soon as the exporter has gone (closed the connection or
// died; buffers it sent and Receive did not return yet are dropped), or ctx's error.
func (im *IPCImport) Receive(ctx context.Context) (*DeviceBuffer, error) {
	var m msg
	// A gone exporter comes first: buffers it sent before it went are dropped (a
	// killed exporter's may not have been written).
	for got := false; !got; {
		select {
		case <-im.gone:
			return nil, im.endErr()
		default:
		}
		if err := im.closedErr(); err != nil {
			return nil, err
		}
		im.mu.Lock()
		if got = len(im.queue) > 0; got {
			m = im.queue[0]
			im.queue = im.queue[1:]
			if len(im.queue) > 0 {
				im.signal() // for another Receive
			}
		}
		im.mu.Unlock()
		if got {
			break
		}
		select {
		case <-im.ready:
		case <-im.gone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := im.ctx
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	b, err := im.open(&m)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, im.goneOr(err)
	}
	_ = im.write(newMsg(msgAck, m.ev(), 0, 0))
	return b, nil
}

// signal leaves a token: the queue may hold a buffer.
func (im *IPCImport) signal() {
	select {
	case im.ready <- struct{}{}:
	default:
	}
}

// open imports the buffer of m, makes its uses wait for the exporter's event and
// registers it, while the exporter cannot have destroyed the event and Close cannot
// have destroyed the pool (opening).
func (im *IPCImport) open(m *msg) (*DeviceBuffer, error) {
	im.opening.RLock()
	defer im.opening.RUnlock()
	if err := im.closedErr(); err != nil {
		return nil, err
	}
	c := im.ctx
	ev, err := im.ev.open(m.ev(), m.handle())
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{m: memBase{ctx: c, ms: im.ms, size: int(m.size()), elem: 1, kind: KindDevice}}
	data := *m.export()
	if err := c.Locked(func() error { return cudaraw.MemPoolImportPointer(&b.m.ptr, im.pool, &data) }); err != nil {
		return nil, fmt.Errorf("cuda: IPC: importing a buffer: %w", err)
	}
	// The buffer's first use is a write on the default stream after the exporter's
	// event, so that every later use waits for the exporter's writes.
	if err := waitOn(&b.m, ev, true); err != nil {
		_ = cudaraw.MemFreeIn(c.h, b.m.ptr)
		return nil, err
	}
	id := m.id()
	im.live.Add(1)
	b.m.reg = resource.ResourceFinalizer(func(b *DeviceBuffer) error { return im.release(b, id) }, b, false,
		resource.Kind("IPC imported buffer"), resource.WithContext(im.ms.cs.res()), resource.CallerSkip(1))
	im.ms.track(&b.m, nil, 1)
	im.mu.Lock()
	im.out[id] = b
	im.held++
	im.mu.Unlock()
	return b, nil
}

// goneWait bounds how long a failed import waits to learn whether the exporter died
// (its socket closes as it exits, maybe after its memory went).
const goneWait = 500 * time.Millisecond

// goneOr returns ErrPeerGone's error if the exporter is gone or goes within
// goneWait (a dying exporter's memory can no longer be imported), else err.
func (im *IPCImport) goneOr(err error) error {
	t := time.NewTimer(goneWait)
	defer t.Stop()
	select {
	case <-im.gone:
		if cerr := im.closedErr(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("%w (%v)", im.err, err)
	case <-t.C:
		return err
	}
}

// closedErr returns ErrClosed's error once Close was called, else nil.
func (im *IPCImport) closedErr() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return errs.Closed("cuda: IPC import")
	}
	return nil
}

// endErr is the error of a Receive that found the connection ended: ErrClosed's if
// this side closed it (Close marks the import closed before it ends the
// connection), else the exporter's.
func (im *IPCImport) endErr() error {
	if err := im.closedErr(); err != nil {
		return err
	}
	return im.err
}

func (im *IPCImport) write(m *msg) error {
	im.wmu.Lock()
	_, err := im.conn.Write(m[:])
	im.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("cuda: IPC: %w: %v", ErrPeerGone, err)
	}
	return nil
}

// release is an imported buffer's release: after its uses, the import is freed on
// the context's disposal stream, an event recorded there after the free, and the
// buffer given back with it. Without the exporter the free alone.
func (im *IPCImport) release(b *DeviceBuffer, id uint64) error {
	if b.m.postpone(func() error { return im.release(b, id) }, false) {
		return nil
	}
	im.mu.Lock()
	delete(im.out, id)
	im.mu.Unlock()
	defer im.live.Done()
	defer im.endIfIdle(1)
	im.opening.RLock() // the events and the pool stay while it runs
	defer im.opening.RUnlock()
	uses := b.m.retire()
	c := b.m.ctx
	if c.enter() != nil {
		return resource.ErrContextDestroyed
	}
	defer c.exit()
	d, err := c.disposalStream()
	if err != nil {
		return err
	}
	var wait deps
	usesOf(uses, &wait)
	if err := b.m.ms.handOff(&wait, d); err != nil {
		return err
	}
	ptr := b.m.ptr
	if err := d.use(func(h cudaraw.CUstream) error { return cudaraw.MemFreeAsyncIn(c.h, ptr, h) }); err != nil {
		return err
	}
	// Also after the exporter's goodbye: it frees the buffer once it read this.
	evi, ev, h, err := im.ev.take()
	if err != nil {
		return nil // the exporter went meanwhile
	}
	if err := d.use(func(s cudaraw.CUstream) error { return cudaraw.EventRecordIn(c.h, ev, s) }); err != nil {
		im.ev.give(evi)
		return err
	}
	out := newMsg(msgRelease, evi, id, 0)
	*out.handle() = *h
	if im.write(out) != nil {
		im.ev.give(evi)
	}
	return nil
}

// Gone is closed when the exporter has gone (closed the connection or died); Err
// then says why.
func (im *IPCImport) Gone() <-chan struct{} { return im.gone }

// Err returns nil while the exporter is connected, then an error matching
// ErrPeerGone.
func (im *IPCImport) Err() error {
	if chanClosed(im.gone) {
		return im.err
	}
	return nil
}

// Close frees the buffers received and not yet closed (after their uses), closes
// the connection and the imported pool. The exporter then frees what it gave.
func (im *IPCImport) Close() error {
	return closeError("cuda: IPC import", im.reg.Release())
}

func (im *IPCImport) close() error {
	im.mu.Lock()
	im.closed = true
	im.mu.Unlock()
	// A Receive in progress has registered its buffer, or will fail, once the
	// opening lock is free.
	im.opening.Lock()
	im.opening.Unlock()
	im.mu.Lock()
	held := make([]*DeviceBuffer, 0, len(im.out))
	for _, b := range im.out {
		held = append(held, b)
	}
	im.mu.Unlock()
	for _, b := range held {
		_ = b.Close()
	}
	// Every import is freed (a release postponed by an operation in progress runs
	// when it ends) before the pool is destroyed.
	im.live.Wait()
	goodbye(im.conn, im.gone)
	err := im.conn.Close()
	<-im.gone
	im.ev.close()
	c := im.ctx.ctxState
	if c.enter() == nil {
		if derr := im.ctx.Locked(func() error { return cudaraw.MemPoolDestroy(im.pool) }); derr != nil {
			err = errors.Join(err, fmt.Errorf("cuda: IPC: destroying the imported pool: %w", derr))
		}
		c.exit()
	}
	return err
}

// chanClosed reports whether c is closed, without waiting.
func chanClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
