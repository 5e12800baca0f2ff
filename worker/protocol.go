package worker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The protocol: frames over the stream socket that the parent passes to each worker
// as file descriptor 3. A frame is a 4-byte big-endian length (of what follows), a
// type byte, an 8-byte request id (the pid in hello) and the type's body, whose
// numbers are varints and whose strings and byte slices are a uvarint length and the
// bytes; a payload, last in its frame, runs to the frame's end.

type frameType uint8

// Parent to worker.
const (
	frameRequest frameType = 1 + iota // deadline (Unix ns, 0: none), handler name, payload
	frameCancel                       // the request's context is canceled
	frameStop                         // no more requests: finish those in flight and exit
)

// Worker to parent.
const (
	frameHello frameType = 16 + iota // the process runs (id: pid); Setup starts
	frameReady                       // Setup's duration (ns) and error text ("": serving)
	frameReply                       // a reply (see below)
	frameBye                         // before a clean exit: live device bytes, Cleanup's error text
)

// Reply statuses: the byte that starts a reply's body.
const (
	replyOK     = 0 // payload
	replyError  = 1 // ErrorKind byte, message
	replyFault  = 2 // device, result, op, stream, message
	replyNotRun = 3 // the worker faulted or was stopping before it started the request
)

const (
	headerSize = 4 + 1 + 8
	// maxFrame bounds what a reader accepts, so that a corrupt length fails the
	// connection instead of allocating it.
	maxFrame = 1<<30 + 1<<16
	// MaxPayload is the largest request or reply payload.
	MaxPayload = 1 << 30
)

var errFrame = errors.New("worker: malformed frame")

// frame builds one frame: newFrame writes the header, the append methods the body,
// bytes fills in the length.
type frame []byte

func newFrame(t frameType, id uint64, size int) frame {
	f := make(frame, headerSize, headerSize+size)
	f[4] = byte(t)
	binary.BigEndian.PutUint64(f[5:], id)
	return f
}

func (f frame) uvarint(v uint64) frame { return binary.AppendUvarint(f, v) }
func (f frame) varint(v int64) frame   { return binary.AppendVarint(f, v) }
func (f frame) str(s string) frame     { return append(f.uvarint(uint64(len(s))), s...) }
func (f frame) raw(b []byte) frame     { return append(f, b...) }

func (f frame) bytes() []byte {
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// readFrame reads the next frame; body is the frame's own memory.
func readFrame(r *bufio.Reader) (t frameType, id uint64, body []byte, err error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:4]))
	if n < headerSize-4 || n > maxFrame {
		return 0, 0, nil, fmt.Errorf("%w: length %d", errFrame, n)
	}
	body = make([]byte, n-(headerSize-4))
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, 0, nil, err
	}
	return frameType(h[4]), binary.BigEndian.Uint64(h[5:]), body, nil
}

// decoder reads a body; the first error sticks and later reads return zeros.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 { return number(d, binary.Uvarint) }
func (d *decoder) varint() int64   { return number(d, binary.Varint) }

func number[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.err = errFrame
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errFrame
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errFrame
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// rest returns what is left: a frame's payload.
func (d *decoder) rest() []byte {
	if d.err != nil {
		return nil
	}
	b := d.b
	d.b = nil
	return b
}
