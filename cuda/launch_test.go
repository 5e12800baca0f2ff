package cuda

// CPU-only tests of launching: shapes, argument packing and checking against a
// kernel's parameter layout, and the checks made before any driver call. The GPU
// tests are in kernels_test.go.

import (
	"encoding/binary"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDim3(t *testing.T) {
	assert.Equal(t, Dim3{5, 1, 1}, D1(5))
	assert.Equal(t, Dim3{5, 6, 1}, D2(5, 6))
	assert.Equal(t, Dim3{5, 6, 7}, D3(5, 6, 7))
	assert.Equal(t, 210, D3(5, 6, 7).Count())
	assert.Equal(t, 5, Dim3{X: 5}.Count())
	assert.Equal(t, 0, Dim3{}.Count())

	assert.Equal(t, 0, Blocks(0, 256))
	assert.Equal(t, 1, Blocks(1, 256))
	assert.Equal(t, 1, Blocks(256, 256))
	assert.Equal(t, 2, Blocks(257, 256))
	assert.Equal(t, 0, Blocks(10, 0))
	assert.Equal(t, 0, Blocks(-5, 256))
	// Near the limit: (n+size-1)/size would overflow.
	assert.Equal(t, math.MaxInt/256+1, Blocks(math.MaxInt, 256))
	assert.Equal(t, 1, Blocks(math.MaxInt, math.MaxInt))

	// Shapes no launch accepts, and products past int, count 0.
	for _, d := range []Dim3{D3(1<<32, 1<<32, 1<<32), D3(-2, 3, 1), D3(2, -3, 1), D3(1, 1, 1<<32), D1(-1)} {
		assert.Zero(t, d.Count(), "%v", d)
	}
	assert.Equal(t, 1<<62, D2(1<<31, 1<<31).Count())
	assert.Zero(t, D2(1<<32-1, 1<<32-1).Count(), "overflows int")
	assert.Zero(t, D3(1<<32-1, 1<<32-1, 1<<32-1).Count(), "overflows int")

	x, y, z, err := Dim3{X: 3}.dims("grid")
	require.NoError(t, err)
	assert.Equal(t, [3]uint32{3, 1, 1}, [3]uint32{x, y, z}, "zero Y and Z count as 1")
	x, y, z, err = D3(1<<32-1, 2, 3).dims("grid")
	require.NoError(t, err)
	assert.Equal(t, [3]uint32{1<<32 - 1, 2, 3}, [3]uint32{x, y, z})

	for _, d := range []Dim3{{}, {0, 1, 1}, {-1, 1, 1}, {1, -1, 1}, {1, 1, -2}, {1 << 32, 1, 1}, {1, 1 << 40, 1}} {
		_, _, _, err := d.dims("block")
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", d)
		assert.Contains(t, err.Error(), "block")
	}
}

// mixedParams is the layout of the test kernel
// mixed(int8, int16, int32, int64, float, double, struct{int; float; double}, uint64*)
// as the driver reports it.
var mixedParams = []paramInfo{{0, 1}, {2, 2}, {4, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 16}, {48, 8}}

type mixedG struct {
	X int32
	Y float32
	Z float64
}

func mixedArgs() []any {
	return []any{int8(-3), int16(-300), int32(-70000), int64(-1 << 40), float32(1.5), float64(-2.25),
		mixedG{7, 0.5, 3.125}, cudaraw.CUdeviceptr(0x7f0000001000)}
}

func checkMixed(t *testing.T, buf []byte) {
	t.Helper()
	ne := binary.NativeEndian
	assert.Equal(t, int8(-3), int8(buf[0]))
	assert.Equal(t, int16(-300), int16(ne.Uint16(buf[2:])))
	assert.Equal(t, int32(-70000), int32(ne.Uint32(buf[4:])))
	assert.Equal(t, int64(-1<<40), int64(ne.Uint64(buf[8:])))
	assert.Equal(t, float32(1.5), math.Float32frombits(ne.Uint32(buf[16:])))
	assert.Equal(t, -2.25, math.Float64frombits(ne.Uint64(buf[24:])))
	assert.Equal(t, int32(7), int32(ne.Uint32(buf[32:])))
	assert.Equal(t, float32(0.5), math.Float32frombits(ne.Uint32(buf[36:])))
	assert.Equal(t, 3.125, math.Float64frombits(ne.Uint64(buf[40:])))
	assert.Equal(t, uint64(0x7f0000001000), ne.Uint64(buf[48:]))
}

func TestPackArgsKnownLayout(t *testing.T) {
	buf := make([]byte, 64)
	var devs opPlan
	size, err := packArgs(buf, mixedParams, true, nil, "mixed", mixedArgs(), &devs)
	require.NoError(t, err)
	assert.Equal(t, uintptr(56), size)
	assert.Zero(t, devs.n)
	checkMixed(t, buf)
}

// Without the driver's layout, arguments are laid out by natural alignment, as C
// lays out the parameters: the same buffer for the same kernel.
func TestPackArgsNaturalLayout(t *testing.T) {
	buf := make([]byte, 64)
	size, err := packArgs(buf, nil, false, nil, "mixed", mixedArgs(), &opPlan{})
	require.NoError(t, err)
	assert.Equal(t, uintptr(56), size)
	checkMixed(t, buf)

	// Past the buffer: the size needed comes back with errParamsTooLarge.
	size, err = packArgs(make([]byte, 16), nil, false, nil, "mixed", mixedArgs(), &opPlan{})
	require.ErrorIs(t, err, errParamsTooLarge)
	assert.Equal(t, uintptr(56), size)

	size, err = packArgs(buf, nil, false, nil, "empty", nil, &opPlan{})
	require.NoError(t, err)
	assert.Zero(t, size)
}

func TestPackArgsScalars(t *testing.T) {
	type index uint16 // named scalar: through reflect
	args := []any{true, false, uint8(200), uint16(60000), uint32(4e9), uint64(1 << 63), int(-5), uint(6),
		uintptr(7), index(9), [3]float32{1, 2, 3}, complex64(complex(1, -1))}
	params := []paramInfo{{0, 1}, {1, 1}, {2, 1}, {4, 2}, {8, 4}, {16, 8}, {24, 8}, {32, 8}, {40, 8},
		{48, 2}, {52, 12}, {64, 8}}
	buf := make([]byte, 128)
	_, err := packArgs(buf, params, true, nil, "k", args, &opPlan{})
	require.NoError(t, err)
	ne := binary.NativeEndian
	at := func(i int) []byte { return buf[params[i].offset:] }
	assert.Equal(t, byte(1), at(0)[0])
	assert.Equal(t, byte(0), at(1)[0])
	assert.Equal(t, byte(200), at(2)[0])
	assert.Equal(t, uint16(60000), ne.Uint16(at(3)))
	assert.Equal(t, uint32(4e9), ne.Uint32(at(4)))
	assert.Equal(t, uint64(1<<63), ne.Uint64(at(5)))
	assert.Equal(t, int64(-5), int64(ne.Uint64(at(6))))
	assert.Equal(t, uint64(6), ne.Uint64(at(7)))
	assert.Equal(t, uint64(7), ne.Uint64(at(8)))
	assert.Equal(t, uint16(9), ne.Uint16(at(9)))
	assert.Equal(t, float32(3), math.Float32frombits(ne.Uint32(at(10)[8:])))
	assert.Equal(t, float32(-1), math.Float32frombits(ne.Uint32(at(11)[4:])))
}

func TestPackArgsErrors(t *testing.T) {
	buf := make([]byte, 64)
	pack := func(params []paramInfo, args ...any) error {
		_, err := packArgs(buf, params, true, nil, "kern", args, &opPlan{})
		return err
	}
	p4 := []paramInfo{{0, 4}}

	err := pack(mixedParams, mixedArgs()[:7]...)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "kernel kern takes 8 parameters, got 7 arguments")
	require.ErrorIs(t, pack(nil, int32(1)), ErrInvalidArgument)

	err = pack(p4, 5) // an untyped constant is an int: 8 bytes
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "argument 0: int is 8 bytes, the parameter is 4 bytes")
	err = pack(p4, 1.5)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "float64 is 8 bytes, the parameter is 4 bytes")
	err = pack([]paramInfo{{0, 4}, {4, 8}}, int32(1), int64(2))
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "argument 1: int64 needs 8-byte alignment, the parameter is at offset 4")
	err = pack([]paramInfo{{0, 4}, {60, 8}}, int32(1), int64(2))
	require.ErrorIs(t, err, ErrInvalidArgument, "a parameter past the buffer")

	x := 3
	for _, bad := range []any{nil, []float32{1}, &x, "text", unsafe.Pointer(&x), map[int]int{}, func() {},
		struct{ P *int }{&x}, [2][]byte{}, make(chan int)} {
		err := pack([]paramInfo{{0, 8}}, bad)
		require.ErrorIs(t, err, ErrInvalidArgument, "%T", bad)
		assert.Contains(t, err.Error(), "argument 0", "%T", bad)
	}
	err = pack([]paramInfo{{0, 8}}, struct{ P *int }{&x})
	assert.Contains(t, err.Error(), "contains *int")
}

// fakeBuf is memory for the CPU tests of packing: a memBase with no driver behind
// it.
type fakeBuf struct{ m memBase }

// newFakeBuf returns fake memory at ptr. It is not inlined, so that the buffer is
// on the heap, as this package's memory always is: a LaunchBatch keeps its
// arguments' memory, a flow that detach hides from escape analysis, and a buffer on
// a test's stack would move when the stack grows (it did, once frames changed size).
//
//go:noinline
func newFakeBuf(ptr cudaraw.CUdeviceptr, ctx *Context) *fakeBuf {
	return &fakeBuf{m: memBase{ptr: ptr, ctx: ctx, size: 8, elem: 1}}
}

// closedBuf returns memory that has been closed.
func closedBuf(ctx *Context) *fakeBuf {
	b := newFakeBuf(0, ctx)
	b.m.hold.users.Or(shutBit)
	return b
}

func (b *fakeBuf) base() *memBase { return &b.m }

// holds returns the number of holds on the memory.
func (b *fakeBuf) holds() int { return int(b.m.hold.inside()) }

// used returns the streams of the memory's recorded uses.
func (b *fakeBuf) used() []*stream {
	var out []*stream
	for _, u := range b.m.acc.uses {
		out = append(out, u.s)
	}
	return out
}

func TestPackArgsDeviceMemory(t *testing.T) {
	ctx, other := fakeContext(), fakeContext()
	b := newFakeBuf(0xabc000, ctx)
	buf := make([]byte, 16)
	params := []paramInfo{{0, 8}, {8, 4}}
	args := []any{b, uint32(1)}
	var held opPlan
	size, err := packArgs(buf, params, true, ctx, "k", args, &held)
	require.NoError(t, err)
	assert.Equal(t, uintptr(12), size)
	assert.Equal(t, 1, held.n)
	assert.Equal(t, uint64(0xabc000), binary.NativeEndian.Uint64(buf))
	assert.Equal(t, 1, b.holds(), "held until the launch is queued")
	s := &stream{}
	held.plan(s)
	assert.Zero(t, held.wait.n)
	held.record(s)
	held.release()
	assert.Zero(t, b.holds())
	assert.Equal(t, []*stream{s}, b.used())

	// Every failure lets go of what it held, the failing argument included.
	_, err = packArgs(buf, params, true, other, "k", []any{b, uint32(1)}, &opPlan{})
	require.ErrorIs(t, err, ErrWrongContext)
	assert.Zero(t, b.holds())
	_, err = packArgs(buf, params, true, ctx, "k", []any{b, int64(1)}, &opPlan{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Zero(t, b.holds())
	_, err = packArgs(buf, []paramInfo{{0, 8}, {8, 8}, {16, 8}}, true, ctx, "k", []any{b, b, "x"}, &opPlan{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Zero(t, b.holds())
	closed := closedBuf(ctx)
	_, err = packArgs(buf, params, true, ctx, "k", []any{b, closed}, &opPlan{})
	require.ErrorIs(t, err, ErrClosed)
	assert.Contains(t, err.Error(), "argument 1")
	assert.Zero(t, b.holds())
	_, err = packArgs(make([]byte, 8), nil, false, ctx, "k", []any{b, [2]uint64{}}, &opPlan{})
	require.ErrorIs(t, err, errParamsTooLarge)
	assert.Zero(t, b.holds())
	assert.Equal(t, []*stream{s}, b.used(), "failed packs record no use")

	// Many arguments: still exactly the held ones are released, on success and on
	// a failure among them.
	many := make([]any, 80)
	for i := range many {
		many[i] = uint64(i)
	}
	many[3], many[70], many[75] = b, b, b
	big := make([]byte, 8*80)
	held = opPlan{}
	_, err = packArgs(big, nil, false, ctx, "k", many, &held)
	require.NoError(t, err)
	assert.Equal(t, 1, b.holds(), "one memory, held once")
	held.release()
	assert.Zero(t, b.holds())
	many[72] = closed
	_, err = packArgs(big, nil, false, ctx, "k", many, &opPlan{})
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, b.holds(), "the hold of arguments 3, 70 and 75 is released")
}

// Packing allocates nothing, even for variables boxed by the caller: the arguments do
// not escape, so the boxes stay on the caller's stack.
func TestPackArgsAllocations(t *testing.T) {
	var buf [inlineParams]byte
	a, x, y, n := float32(2), cudaraw.CUdeviceptr(0x1000), cudaraw.CUdeviceptr(0x2000), int32(1000)
	g := mixedG{1, 2, 3}
	b := newFakeBuf(0x3000, fakeContext())
	params := []paramInfo{{0, 4}, {8, 8}, {16, 8}, {24, 4}, {32, 16}, {48, 8}}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := packArgs(buf[:], params, true, nil, "k", []any{a, x, y, n, g, b}, &opPlan{}); err != nil {
			t.Fatal(err)
		}
		a++
		n++
		g.X++
	})
	assert.Zero(t, allocs)
}

func TestDetach(t *testing.T) {
	v := mixedG{1, 2, 3}
	a := any(v)
	d := detach(&a)
	assert.Equal(t, v, d)
	b := newFakeBuf(0, nil)
	a = b
	assert.Same(t, b, detach(&a))
	a = nil
	assert.Nil(t, detach(&a))
}

func TestModuleImage(t *testing.T) {
	ptx := []byte(".version 8.0\n")
	img := moduleImage(ptx)
	assert.Equal(t, append(ptx, 0), img, "PTX gets a NUL")
	assert.Len(t, ptx, 13, "the caller's image is not modified")
	term := []byte(".version 8.0\n\x00")
	assert.Same(t, &term[0], &moduleImage(term)[0], "a NUL-terminated image is used as it is")
	elf := []byte("\x7fELF\x02\x01\x01rest")
	assert.Same(t, &elf[0], &moduleImage(elf)[0], "cubin")
	fat := []byte{0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0}
	assert.Same(t, &fat[0], &moduleImage(fat)[0], "fatbin")
}

// Nil and empty inputs are rejected before any driver call.
func TestLaunchNilChecks(t *testing.T) {
	var f *Function
	require.ErrorIs(t, f.Launch(nil, D1(1), D1(1), 0), ErrInvalidArgument)
	assert.Empty(t, f.Name())
	assert.Zero(t, f.Handle())
	_, ok := f.Params()
	assert.False(t, ok)
	_, err := f.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_NUM_REGS)
	require.ErrorIs(t, err, ErrInvalidArgument)

	f = &Function{mod: &Module{ctx: fakeContext()}, name: "k", known: true}
	require.ErrorIs(t, f.Launch(nil, D1(1), D1(1), 0), ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(&Stream{}, D1(1), D1(1), 0), ErrInvalidArgument)

	var m *Module
	_, err = m.Function("k")
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, _, err = m.Global("g")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, m.Close(), ErrClosed, "the Close of a nil Module")
	assert.Zero(t, m.Handle())

	var c *Context
	_, err = c.LoadModule([]byte(".version 8.0"))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (&Context{}).LoadModule([]byte(".version 8.0"))
	require.ErrorIs(t, err, ErrInvalidArgument, "zero Context")
	_, err = fakeContext().LoadModule(nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	dead := fakeContext()
	destroyFake(dead)
	_, err = dead.LoadModule([]byte(".version 8.0"))
	require.ErrorIs(t, err, ErrClosed)
}

// A launch with a bad shape, shared memory size, stream or arguments fails before
// anything reaches the driver; with the stream and module of different contexts, it
// fails with ErrWrongContext.
func TestLaunchChecksBeforeDriver(t *testing.T) {
	ctx := fakeContext()
	m := &Module{ctx: ctx}
	f := &Function{mod: m, name: "k", params: []paramInfo{{0, 4}}, known: true, argSize: 4}
	s := fakeStream(ctx)

	require.ErrorIs(t, f.Launch(s, Dim3{}, D1(1), 0, int32(1)), ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(s, D1(1), D1(-1), 0, int32(1)), ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(s, D1(1), D1(1), -1, int32(1)), ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(s, D1(1), D1(1), 0), ErrInvalidArgument)
	require.ErrorIs(t, f.Launch(s, D1(1), D1(1), 0, int64(1)), ErrInvalidArgument)

	other := fakeStream(fakeContext())
	require.ErrorIs(t, f.Launch(other, D1(1), D1(1), 0, int32(1)), ErrWrongContext)

	m.closed = true
	require.ErrorIs(t, f.Launch(s, D1(1), D1(1), 0, int32(1)), ErrClosed)
	_, err := m.Function("k")
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = m.Global("g")
	require.ErrorIs(t, err, ErrClosed)
	_, err = f.Attribute(cudaraw.CU_FUNC_ATTRIBUTE_NUM_REGS)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, m.Close(), ErrClosed, "a Module that was never loaded")

	m.closed = false
	s.closed.Store(true)
	require.ErrorIs(t, f.Launch(s, D1(1), D1(1), 0, int32(1)), ErrClosed)

	_, err = m.Function("a\x00b")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestFunctionParams(t *testing.T) {
	f := &Function{params: mixedParams, known: true}
	p, ok := f.Params()
	require.True(t, ok)
	require.Len(t, p, 8)
	assert.Equal(t, Param{Offset: 32, Size: 16}, p[6])
	_, ok = (&Function{}).Params()
	assert.False(t, ok)
}

// A buffer passed twice (input and output) is held once, and both parameters get its
// address.
func TestPackArgsSameBufferTwice(t *testing.T) {
	ctx, _, b := fakeMem(64)
	b.m.ptr = 0xd000
	buf := make([]byte, 24)
	params := []paramInfo{{0, 8}, {8, 4}, {16, 8}}
	args := []any{b, float32(1), b}
	var held opPlan
	_, err := packArgs(buf, params, true, ctx, "k", args, &held)
	require.NoError(t, err)
	assert.Equal(t, 1, held.n, "one hold")
	assert.Equal(t, uint32(1), b.m.hold.inside())
	assert.Equal(t, uint64(0xd000), binary.NativeEndian.Uint64(buf[0:]))
	assert.Equal(t, uint64(0xd000), binary.NativeEndian.Uint64(buf[16:]))
	held.release()
	assert.Zero(t, b.m.hold.inside())
}

// Past the plan's inline operands, holds, repeats, Inputs made written by an
// unmarked repeat, and the recorded uses agree with those before.
func TestPackArgsPastKeptMemory(t *testing.T) {
	ctx := fakeContext()
	var bs [6]*fakeBuf
	for i := range bs {
		bs[i] = newFakeBuf(cudaraw.CUdeviceptr(0x1000*(i+1)), ctx)
	}
	in := func(b *fakeBuf) Input { return Input{&b.m} }
	// Held: 0, 1 (Input), 2, 3, 4 (Input, made written by 7), 5; repeats: 7 of 4,
	// 8 of 0 (an Input of written memory), 9 of 1 (an Input again).
	args := []any{bs[0], in(bs[1]), bs[2], bs[3], in(bs[4]), bs[5], uint32(7), bs[4], in(bs[0]), in(bs[1])}
	var held opPlan
	_, err := packArgs(make([]byte, 8*len(args)), nil, false, ctx, "k", args, &held)
	require.NoError(t, err)
	assert.Equal(t, 6, held.n)
	for i, b := range bs {
		assert.Equal(t, 1, b.holds(), "buffer %d: one hold", i)
	}
	assert.Equal(t, []bool{true, false, true, true, true, true}, writesOf(&held))
	s := &stream{}
	held.plan(s)
	held.record(s)
	held.release()
	for i, b := range bs {
		assert.Zero(t, b.holds(), "buffer %d", i)
		require.Len(t, b.m.acc.uses, 1, "buffer %d", i)
		assert.Equal(t, s, b.m.acc.uses[0].s)
		assert.Equal(t, i != 1, b.m.acc.uses[0].write, "buffer %d", i)
	}
}

// One walk of types for Go pointers serves kernel arguments and element types, and a
// zero-length array holds none, whatever its element type.
func TestPointerFreeTypes(t *testing.T) {
	type tail struct {
		N    int32
		Tail [0]*int
	}
	require.NoError(t, checkArgType(reflect.TypeFor[tail]()))
	assert.False(t, hasPointers(reflect.TypeFor[tail]()))
	n, err := elemSize[tail]()
	require.NoError(t, err)
	assert.Equal(t, int(reflect.TypeFor[tail]().Size()), n)
	for _, bad := range []reflect.Type{reflect.TypeFor[*int](), reflect.TypeFor[[1]*int](), reflect.TypeFor[struct{ S string }](),
		reflect.TypeFor[[]byte](), reflect.TypeFor[map[int]int]()} {
		require.Error(t, checkArgType(bad), "%v", bad)
		assert.True(t, hasPointers(bad), "%v", bad)
	}
}

// writesOf returns whether the operation writes each operand of p, in order.
func writesOf(p *opPlan) []bool {
	var out []bool
	p.each(func(_ *memBase, write bool) { out = append(out, write) })
	return out
}
