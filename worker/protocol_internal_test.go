package worker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// Frames read back as written, several in one stream.
func TestFrames(t *testing.T) {
	fe := &cuda.FaultError{Device: 1, Result: cudaraw.CUDA_ERROR_ILLEGAL_ADDRESS, Op: "Stream.Synchronize", Stream: 0xdead}
	var buf bytes.Buffer
	buf.Write(newFrame(frameRequest, 7, 0).varint(-1).str("axpy").raw([]byte("payload")).bytes())
	buf.Write(newFrame(frameReply, 8, 0).raw([]byte{replyOK}).bytes())
	buf.Write(faultReply(9, fe, "it faulted").bytes())
	buf.Write(newFrame(frameReply, 10, 0).raw([]byte{replyError, byte(KindDeadline)}).str("too late").bytes())
	r := bufio.NewReader(&buf)
	// next reads a frame and returns its id and decoder.
	next := func(want frameType) (uint64, *decoder) {
		t.Helper()
		ty, id, body, err := readFrame(r)
		require.NoError(t, err)
		require.Equal(t, want, ty)
		return id, &decoder{b: body}
	}
	reply := func() (uint64, reply) {
		t.Helper()
		id, d := next(frameReply)
		rep := decodeReply(d)
		require.NoError(t, d.err)
		return id, rep
	}

	id, d := next(frameRequest)
	assert.EqualValues(t, 7, id)
	assert.EqualValues(t, -1, d.varint())
	assert.Equal(t, "axpy", d.str())
	assert.Equal(t, "payload", string(d.rest()))
	require.NoError(t, d.err)

	id, rep := reply()
	assert.EqualValues(t, 8, id)
	assert.Equal(t, byte(replyOK), rep.status)
	assert.Empty(t, rep.payload)

	_, rep = reply()
	assert.Equal(t, fe, rep.fault)
	werr := rep.err("h", 42)
	assert.ErrorIs(t, werr, cuda.ErrFaulted)
	assert.ErrorIs(t, werr, cudaraw.ErrIllegalAddress)
	assert.Contains(t, werr.Error(), "it faulted")

	_, rep = reply()
	assert.Equal(t, KindDeadline, rep.kind)
	assert.Equal(t, "too late", rep.msg)

	_, _, _, err := readFrame(r)
	assert.Error(t, err, "the end of the stream")
}

// A corrupt frame fails the read instead of allocating its length or reading past
// its body.
func TestBadFrames(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	huge = append(huge, make([]byte, headerSize-4)...)
	_, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(huge)))
	assert.True(t, errors.Is(err, errFrame), "%v", err)

	d := decoder{b: []byte{0x05, 'a'}} // a string of 5 bytes with 1 there
	assert.Empty(t, d.str())
	assert.ErrorIs(t, d.err, errFrame)
	d = decoder{b: []byte{replyFault}}
	decodeReply(&d)
	assert.ErrorIs(t, d.err, errFrame)
}
