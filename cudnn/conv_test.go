package cudnn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/dl"
)

// setup returns the primary context and a stream of it.
func setup(t *testing.T, needs ...cudatest.Need) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	return cudatest.Stream(t, needs...)
}

// Every bad argument is an error before any CUDA call: these run on the fake driver
// (CI), where cuDNN is absent.
func TestArgumentChecks(t *testing.T) {
	ctx, s := setup(t)
	alloc := func(n int) *cuda.DeviceBuffer {
		b, err := cuda.AllocFor[float32](s, n)
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		return b
	}
	slice := func(b *cuda.DeviceBuffer, off, n int) *cuda.DeviceBuffer {
		v, err := b.Slice(off, n)
		require.NoError(t, err)
		return v
	}
	xs, ws := cudnn.Tensor4D{N: 1, C: 2, H: 5, W: 5}, cudnn.Filter{K: 3, C: 2, R: 3, S: 3}
	x, w, y := alloc(xs.Len()), alloc(ws.Len()), alloc(27) // y: 1×3×3×3
	big := alloc(200)
	d, err := cuda.AllocFor[float64](s, 200)
	require.NoError(t, err)
	defer d.Close()
	raw, err := ctx.Alloc(s, 4*50) // untyped: 50 float32, 25 float64
	require.NoError(t, err)
	defer raw.Close()
	var nilBuf *cuda.DeviceBuffer
	conv := cudnn.Conv{}
	relu := cudnn.Activation{Mode: cudnn.ReLU}
	shape := cudnn.Tensor4D{N: 1, C: 2, H: 5, W: 5} // 50 elements
	a, b := slice(big, 0, 50), slice(big, 10, 50)   // partly overlapping
	cached := cudnn.CachedAlgorithmsForTest(ctx)

	cases := []struct {
		name, op string
		err      error
	}{
		{"zero N", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, cudnn.Tensor4D{N: 0, C: 2, H: 5, W: 5}, w, ws, 0, y)},
		{"negative W", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, cudnn.Tensor4D{N: 1, C: 2, H: 5, W: -5}, w, ws, 0, y)},
		{"zero filter K", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, cudnn.Filter{K: 0, C: 2, R: 3, S: 3}, 0, y)},
		{"too many elements", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, cudnn.Tensor4D{N: 1 << 16, C: 1 << 16, H: 1, W: 1}, w, ws, 0, y)},
		{"negative pad", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{PadH: -1}, 1, x, xs, w, ws, 0, y)},
		{"negative stride", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{StrideW: -2}, 1, x, xs, w, ws, 0, y)},
		{"negative dilation", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{DilationH: -1}, 1, x, xs, w, ws, 0, y)},
		{"mode", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{Mode: 7}, 1, x, xs, w, ws, 0, y)},
		{"channels", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, cudnn.Filter{K: 3, C: 1, R: 3, S: 3}, 0, y)},
		{"filter larger than input", "convolution forward", cudnn.Convolve[float32](s, conv, 1, big, xs, big, cudnn.Filter{K: 1, C: 2, R: 6, S: 3}, 0, y)},
		{"dilated filter larger", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{DilationW: 3}, 1, x, xs, w, ws, 0, y)},
		{"x too small", "convolution forward", cudnn.Convolve[float32](s, conv, 1, slice(x, 0, 49), xs, w, ws, 0, y)},
		{"w too small", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, slice(w, 1, 53), ws, 0, y)},
		{"y too small", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, slice(y, 0, 26))},
		{"y too small for padding", "convolution forward", cudnn.Convolve[float32](s, cudnn.Conv{PadH: 1, PadW: 1}, 1, x, xs, w, ws, 0, y)},
		{"element type", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, d, ws, 0, y)},
		{"float64 on float32 memory", "convolution forward", cudnn.Convolve[float64](s, conv, 1, x, xs, w, ws, 0, y)},
		{"untyped too small", "convolution forward", cudnn.Convolve[float64](s, conv, 1, raw, cudnn.Tensor4D{N: 2, C: 2, H: 5, W: 5}, d, ws, 0, d)},
		{"nil x", "convolution forward", cudnn.Convolve[float32](s, conv, 1, nil, xs, w, ws, 0, y)},
		{"nil buffer", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, nilBuf, ws, 0, y)},
		{"nil stream", "convolution forward", cudnn.Convolve[float32](nil, conv, 1, x, xs, w, ws, 0, y)},
		{"y is x", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, x)},
		{"y overlaps w", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, slice(big, 0, 54), ws, 0, slice(big, 50, 27))},
		{"workspace limit", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, y, cudnn.WorkspaceLimit(-1))},
		{"algorithm", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, y, cudnn.Algorithm(cudnn.WinogradNonfused+1))},
		{"negative algorithm", "convolution forward", cudnn.Convolve[float32](s, conv, 1, x, xs, w, ws, 0, y, cudnn.Algorithm(-1))},

		{"activation mode", "activation forward", cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnnraw.CUDNN_ACTIVATION_IDENTITY}, shape, 1, x, 0, big)},
		{"clipped ReLU without ceiling", "activation forward", cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnn.ClippedReLU}, shape, 1, x, 0, big)},
		{"ELU NaN", "activation forward", cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnn.ELU, Coef: math.NaN()}, shape, 1, x, 0, big)},
		{"activation zero C", "activation forward", cudnn.Activate[float32](s, relu, cudnn.Tensor4D{N: 1, C: 0, H: 5, W: 5}, 1, x, 0, big)},
		{"activation x too small", "activation forward", cudnn.Activate[float32](s, relu, shape, 1, y, 0, big)},
		{"activation y type", "activation forward", cudnn.Activate[float32](s, relu, shape, 1, x, 0, d)},
		{"activation partial overlap", "activation forward", cudnn.Activate[float32](s, relu, shape, 1, a, 0, b)},
		{"activation nil stream", "activation forward", cudnn.Activate[float32](nil, relu, shape, 1, x, 0, big)},

		{"softmax algorithm", "softmax forward", cudnn.Softmax[float32](s, 7, cudnn.SoftmaxInstance, shape, 1, x, 0, big)},
		{"softmax mode", "softmax forward", cudnn.Softmax[float32](s, cudnn.SoftmaxAccurate, 9, shape, 1, x, 0, big)},
		{"softmax in place", "softmax forward", cudnn.Softmax[float32](s, cudnn.SoftmaxAccurate, cudnn.SoftmaxChannel, shape, 1, x, 0, x)},
		{"softmax y too small", "softmax forward", cudnn.Softmax[float32](s, cudnn.SoftmaxLog, cudnn.SoftmaxChannel, shape, 1, x, 0, y)},
		{"softmax float64", "softmax forward", cudnn.Softmax[float64](s, cudnn.SoftmaxLog, cudnn.SoftmaxChannel, shape, 1, x, 0, d)},

		{"bias too small", "add bias", cudnn.AddBias[float32](s, cudnn.Tensor4D{N: 1, C: 3, H: 3, W: 3}, 1, slice(w, 0, 2), 1, y)},
		{"bias overlaps y", "add bias", cudnn.AddBias[float32](s, cudnn.Tensor4D{N: 1, C: 3, H: 3, W: 3}, 1, slice(big, 0, 3), 1, big)},
		{"bias type", "add bias", cudnn.AddBias[float64](s, cudnn.Tensor4D{N: 1, C: 3, H: 3, W: 3}, 1, x, 1, d)},
		{"bias negative H", "add bias", cudnn.AddBias[float32](s, cudnn.Tensor4D{N: 1, C: 3, H: -3, W: 3}, 1, w, 1, y)},
	}
	for _, c := range cases {
		require.ErrorIs(t, c.err, cuda.ErrInvalidArgument, c.name)
		assert.Contains(t, c.err.Error(), "cudnn: "+c.op+": ", c.name)
		assert.False(t, errors.Is(c.err, dl.ErrLibraryNotFound), "%s: checked after loading cuDNN: %v", c.name, c.err)
	}

	_, err = cudnn.ConvolutionOutputShape(xs, cudnn.Filter{K: 1, C: 3, R: 1, S: 1}, conv)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "cudnn: convolution output shape: ")

	// Memory of another context than the stream's.
	other, err := cuda.NewContext(0, 0)
	require.NoError(t, err)
	defer other.Close()
	os2, err := other.NewStream()
	require.NoError(t, err)
	defer os2.Close()
	err = cudnn.Convolve[float32](os2, conv, 1, x, xs, w, ws, 0, y)
	require.ErrorIs(t, err, cuda.ErrWrongContext)
	assert.Contains(t, err.Error(), "cudnn: convolution forward: ")
	err = cudnn.Activate[float32](os2, relu, shape, 1, x, 0, big)
	require.ErrorIs(t, err, cuda.ErrWrongContext)
	assert.Equal(t, cached, cudnn.CachedAlgorithmsForTest(ctx), "a rejected call chose an algorithm")
}

// Where libcudnn.so.9 cannot be loaded (CI), valid calls return its typed error,
// wrapped with the operation's name, and cache nothing.
func TestOperationsWithoutLibrary(t *testing.T) {
	ctx, s := setup(t)
	if _, err := cudnnraw.Library().Path(); err == nil {
		t.Skip("cuDNN is installed: this checks the error where it is not")
	}
	xs, ws := cudnn.Tensor4D{N: 1, C: 2, H: 5, W: 5}, cudnn.Filter{K: 3, C: 2, R: 3, S: 3}
	x := cudatest.AllocFrom(t, s, make([]float32, xs.Len()))
	w := cudatest.AllocFrom(t, s, make([]float32, ws.Len()))
	y := cudatest.AllocFrom(t, s, make([]float32, 27))
	shape := cudnn.Tensor4D{N: 1, C: 3, H: 3, W: 3}
	for op, err := range map[string]error{
		"convolution forward": cudnn.Convolve[float32](s, cudnn.Conv{}, 1, x, xs, w, ws, 0, y),
		"activation forward":  cudnn.Activate[float32](s, cudnn.Activation{Mode: cudnn.Tanh}, shape, 1, y, 0, y),
		"softmax forward":     cudnn.Softmax[float32](s, cudnn.SoftmaxAccurate, cudnn.SoftmaxInstance, shape, 1, y, 0, x),
		"add bias":            cudnn.AddBias[float32](s, shape, 1, w, 1, y),
	} {
		require.ErrorIs(t, err, dl.ErrLibraryNotFound, op)
		var le *dl.LibraryError
		assert.True(t, errors.As(err, &le), op)
		assert.Contains(t, err.Error(), "cudnn: "+op+": ", op)
	}
	assert.Zero(t, cudnn.CachedAlgorithmsForTest(ctx))
	assert.Zero(t, cudnn.IdleHandlesForTest(ctx))
}

// ConvolutionOutputShape is computed in Go, as cuDNN does.
func TestConvolutionOutputShape(t *testing.T) {
	for _, c := range []struct {
		x    cudnn.Tensor4D
		w    cudnn.Filter
		conv cudnn.Conv
		want cudnn.Tensor4D
	}{
		{cudnn.Tensor4D{N: 2, C: 3, H: 7, W: 9}, cudnn.Filter{K: 4, C: 3, R: 3, S: 3}, cudnn.Conv{PadH: 1, PadW: 1}, cudnn.Tensor4D{N: 2, C: 4, H: 7, W: 9}},
		{cudnn.Tensor4D{N: 1, C: 2, H: 10, W: 8}, cudnn.Filter{K: 3, C: 2, R: 3, S: 2}, cudnn.Conv{PadW: 1, StrideH: 2, StrideW: 3}, cudnn.Tensor4D{N: 1, C: 3, H: 4, W: 3}},
		{cudnn.Tensor4D{N: 2, C: 4, H: 9, W: 11}, cudnn.Filter{K: 5, C: 4, R: 3, S: 3}, cudnn.Conv{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, cudnn.Tensor4D{N: 2, C: 5, H: 9, W: 11}},
		{cudnn.Tensor4D{N: 2, C: 3, H: 5, W: 5}, cudnn.Filter{K: 2, C: 3, R: 5, S: 5}, cudnn.Conv{}, cudnn.Tensor4D{N: 2, C: 2, H: 1, W: 1}},
		{cudnn.Tensor4D{N: 1, C: 1, H: 1, W: 1}, cudnn.Filter{K: 1, C: 1, R: 3, S: 3}, cudnn.Conv{PadH: 1, PadW: 1, StrideH: 5}, cudnn.Tensor4D{N: 1, C: 1, H: 1, W: 1}},
	} {
		got, err := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%v * %v %+v", c.x, c.w, c.conv)
	}
}

// ConvolutionOutputShape agrees with cudnnGetConvolution2dForwardOutputDim, through
// the raw layer and its owned descriptors. It needs cuDNN, not a GPU.
func TestConvolutionOutputShapeMatchesCuDNN(t *testing.T) {
	cudatest.RequireLibrary(t, cudnnraw.Library())
	r := rand.New(rand.NewPCG(3, 3))
	for range 200 {
		x := cudnn.Tensor4D{N: 1 + r.IntN(3), C: 1 + r.IntN(4), H: 1 + r.IntN(20), W: 1 + r.IntN(20)}
		w := cudnn.Filter{K: 1 + r.IntN(4), C: x.C, R: 1 + r.IntN(5), S: 1 + r.IntN(5)}
		conv := cudnn.Conv{PadH: r.IntN(3), PadW: r.IntN(3), StrideH: r.IntN(4), StrideW: r.IntN(4), DilationH: r.IntN(3), DilationW: r.IntN(3)}
		got, err := cudnn.ConvolutionOutputShape(x, w, conv)
		if err != nil {
			require.ErrorIs(t, err, cuda.ErrInvalidArgument)
			continue // the filter does not fit: cuDNN's answer is not an output shape
		}
		td, err := cudnnraw.NewOwnedTensorDescriptor()
		require.NoError(t, err)
		fd, err := cudnnraw.NewOwnedFilterDescriptor()
		require.NoError(t, err)
		cd, err := cudnnraw.NewOwnedConvolutionDescriptor()
		require.NoError(t, err)
		or1 := func(v int) int32 { return int32(max(v, 1)) }
		require.NoError(t, cudnnraw.SetTensor4dDescriptor(td.Handle(), cudnnraw.CUDNN_TENSOR_NCHW, cudnnraw.CUDNN_DATA_FLOAT, int32(x.N), int32(x.C), int32(x.H), int32(x.W)))
		require.NoError(t, cudnnraw.SetFilter4dDescriptor(fd.Handle(), cudnnraw.CUDNN_DATA_FLOAT, cudnnraw.CUDNN_TENSOR_NCHW, int32(w.K), int32(w.C), int32(w.R), int32(w.S)))
		require.NoError(t, cudnnraw.SetConvolution2dDescriptor(cd.Handle(), int32(conv.PadH), int32(conv.PadW), or1(conv.StrideH), or1(conv.StrideW),
			or1(conv.DilationH), or1(conv.DilationW), cudnnraw.CUDNN_CROSS_CORRELATION, cudnnraw.CUDNN_DATA_FLOAT))
		var n, c, h, ww int32
		require.NoError(t, cudnnraw.GetConvolution2dForwardOutputDim(cd.Handle(), td.Handle(), fd.Handle(), &n, &c, &h, &ww))
		assert.Equal(t, cudnn.Tensor4D{N: int(n), C: int(c), H: int(h), W: int(ww)}, got, "%v * %v %+v", x, w, conv)
		assert.NoError(t, td.Close())
		assert.NoError(t, fd.Close())
		assert.NoError(t, cd.Close())
	}
}

// convCase is a convolution of the GPU tests: small, with padding, strides,
// dilations and both modes.
type convCase struct {
	name string
	x    cudnn.Tensor4D
	w    cudnn.Filter
	conv cudnn.Conv
}

var convCases = []convCase{
	{"3x3 same", cudnn.Tensor4D{N: 2, C: 3, H: 7, W: 9}, cudnn.Filter{K: 4, C: 3, R: 3, S: 3}, cudnn.Conv{PadH: 1, PadW: 1}},
	{"strided", cudnn.Tensor4D{N: 1, C: 2, H: 10, W: 8}, cudnn.Filter{K: 3, C: 2, R: 3, S: 2}, cudnn.Conv{PadW: 1, StrideH: 2, StrideW: 3}},
	{"dilated", cudnn.Tensor4D{N: 2, C: 4, H: 9, W: 11}, cudnn.Filter{K: 5, C: 4, R: 3, S: 3}, cudnn.Conv{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}},
	{"flipped", cudnn.Tensor4D{N: 3, C: 1, H: 6, W: 6}, cudnn.Filter{K: 2, C: 1, R: 2, S: 3}, cudnn.Conv{StrideH: 2, Mode: cudnn.Convolution}},
	{"5x5", cudnn.Tensor4D{N: 1, C: 8, H: 12, W: 12}, cudnn.Filter{K: 8, C: 8, R: 5, S: 5}, cudnn.Conv{PadH: 2, PadW: 2}},
	{"filter as large as the input", cudnn.Tensor4D{N: 2, C: 3, H: 5, W: 5}, cudnn.Filter{K: 2, C: 3, R: 5, S: 5}, cudnn.Conv{}},
	{"everything", cudnn.Tensor4D{N: 2, C: 2, H: 11, W: 13}, cudnn.Filter{K: 3, C: 2, R: 3, S: 3},
		cudnn.Conv{PadH: 1, PadW: 3, StrideH: 2, StrideW: 2, DilationW: 3, Mode: cudnn.Convolution}},
}

// convRef is y = alpha·conv(x, w) + beta·y0 computed directly in float64, and for
// each element the sum of the magnitudes of its terms (the scale of its rounding
// error). With beta 0, y0 is not read.
func convRef(c convCase, x, w []float64, alpha, beta float64, y0 []float64) (want, scale []float64) {
	ys, err := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
	if err != nil {
		panic(err)
	}
	or1 := func(v int) int { return max(v, 1) }
	sh, sw, dh, dw := or1(c.conv.StrideH), or1(c.conv.StrideW), or1(c.conv.DilationH), or1(c.conv.DilationW)
	want, scale = make([]float64, ys.Len()), make([]float64, ys.Len())
	for n := range ys.N {
		for k := range ys.C {
			for p := range ys.H {
				for q := range ys.W {
					var sum, mag float64
					for ch := range c.x.C {
						for r := range c.w.R {
							for s := range c.w.S {
								ih, iw := p*sh-c.conv.PadH+r*dh, q*sw-c.conv.PadW+s*dw
								if ih < 0 || ih >= c.x.H || iw < 0 || iw >= c.x.W {
									continue
								}
								fr, fs := r, s
								if c.conv.Mode == cudnn.Convolution {
									fr, fs = c.w.R-1-r, c.w.S-1-s
								}
								v := x[((n*c.x.C+ch)*c.x.H+ih)*c.x.W+iw] * w[((k*c.w.C+ch)*c.w.R+fr)*c.w.S+fs]
								sum += v
								mag += math.Abs(v)
							}
						}
					}
					i := ((n*ys.C+k)*ys.H+p)*ys.W + q
					want[i], scale[i] = alpha*sum, math.Abs(alpha)*mag
					if beta != 0 {
						want[i] += beta * y0[i]
						scale[i] += math.Abs(beta * y0[i])
					}
				}
			}
		}
	}
	return want, scale
}

// randoms returns n values of T uniform in [-1, 1) and the same values in float64.
func randoms[T cudnn.Float](r *rand.Rand, n int) ([]T, []float64) {
	v, ref := make([]T, n), make([]float64, n)
	for i := range v {
		v[i] = T(r.Float64()*2 - 1)
		ref[i] = float64(v[i])
	}
	return v, ref
}

// nans returns n NaNs of T: an output that beta 0 must not read.
func nans[T cudnn.Float](n int) []T {
	v := make([]T, n)
	for i := range v {
		v[i] = T(math.NaN())
	}
	return v
}

func toF64[T cudnn.Float](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func isFloat32[T cudnn.Float]() bool {
	var z T
	_, ok := any(z).(float32)
	return ok
}

// convTolerance is the error allowed for an element whose terms have magnitudes
// summing to scale: float32 with room for FFT and Winograd algorithms (still far
// below a wrong tap), float64 tight.
func convTolerance[T cudnn.Float](scale float64) float64 {
	if isFloat32[T]() {
		return 2e-4*scale + 1e-6
	}
	return 1e-12*scale + 1e-13
}

// checkConv runs c on s with random operands, alpha 1.5 and beta -0.5 (y random),
// then beta 0 (y NaN), and compares y with convRef.
func checkConv[T cudnn.Float](t *testing.T, s *cuda.Stream, c convCase, seed uint64, opts ...cudnn.ConvOption) {
	t.Helper()
	checkConvTol[T](t, s, c, seed, 1, opts...)
}

// checkConvTol is checkConv with the tolerance multiplied by loose.
func checkConvTol[T cudnn.Float](t *testing.T, s *cuda.Stream, c convCase, seed uint64, loose float64, opts ...cudnn.ConvOption) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	ys, err := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
	require.NoError(t, err)
	x, xRef := randoms[T](r, c.x.Len())
	w, wRef := randoms[T](r, c.w.Len())
	dX, dW := cudatest.AllocFrom(t, s, x), cudatest.AllocFrom(t, s, w)
	for _, beta := range []float64{-0.5, 0} { // beta first: a Find must leave y alone
		y0, y0Ref := randoms[T](r, ys.Len())
		if beta == 0 {
			y0 = nans[T](ys.Len())
		}
		dY := cudatest.AllocFrom(t, s, y0)
		require.NoError(t, cudnn.Convolve(s, c.conv, T(1.5), dX, c.x, dW, c.w, T(beta), dY, opts...), "%s", c.name)
		got := toF64(cudatest.Read[T](t, dY, ys.Len()))
		want, scale := convRef(c, xRef, wRef, 1.5, beta, y0Ref)
		bad := 0
		for i := range want {
			if d := math.Abs(got[i] - want[i]); !(d <= loose*convTolerance[T](scale[i])) {
				if bad++; bad <= 5 {
					t.Errorf("%T %s (%v * %v %+v, beta %v): y[%d] = %v, want %v (scale %.3g)",
						x[0], c.name, c.x, c.w, c.conv, beta, i, got[i], want[i], scale[i])
				}
			}
		}
		if bad > 5 {
			t.Errorf("... %d elements wrong of %d", bad, len(want))
		}
	}
}

// Convolutions of both types, by heuristics and by Find, against a direct CPU
// convolution; the choices are cached (once per key).
func TestConvolve(t *testing.T) {
	ctx, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	for i, c := range convCases {
		t.Run(c.name, func(t *testing.T) {
			checkConv[float32](t, s, c, uint64(i))
			checkConv[float64](t, s, c, uint64(i)+100)
			// Find may pick Winograd, which is less precise (TestConvolveAlgorithms).
			checkConvTol[float32](t, s, c, uint64(i)+200, 10, cudnn.FindAlgorithm())
			checkConv[float64](t, s, c, uint64(i)+300, cudnn.FindAlgorithm())
		})
	}
	n := cudnn.CachedAlgorithmsForTest(ctx)
	assert.GreaterOrEqual(t, n, 4*len(convCases))
	checkConv[float32](t, s, convCases[0], 9)
	checkConv[float64](t, s, convCases[0], 9, cudnn.FindAlgorithm())
	assert.Equal(t, n, cudnn.CachedAlgorithmsForTest(ctx), "a second call of the same key chose again")
	assert.LessOrEqual(t, cudnn.IdleHandlesForTest(ctx), cudnn.MaxIdleHandles)
}

// Every algorithm cuDNN supports for a case computes the same convolution; the
// workspace path is taken (some algorithm needs one). TensorCores runs, with a TF32
// tolerance.
func TestConvolveAlgorithms(t *testing.T) {
	ctx, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	for _, c := range []convCase{convCases[0], convCases[4]} {
		ran := 0
		for a := cudnnraw.CudnnConvolutionFwdAlgo(0); a < cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_COUNT; a++ {
			ys, _ := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
			x := cudatest.AllocFrom(t, s, make([]float32, c.x.Len()))
			w := cudatest.AllocFrom(t, s, make([]float32, c.w.Len()))
			y := cudatest.AllocFrom(t, s, make([]float32, ys.Len()))
			err := cudnn.Convolve[float32](s, c.conv, 1, x, c.x, w, c.w, 0, y, cudnn.Algorithm(a))
			var st cudnnraw.Status
			if err != nil && errors.As(err, &st) && st >= 2000 && st < 4000 { // bad param or not supported
				t.Logf("%s: %v: not for this case: %v", c.name, a, err)
				continue
			}
			require.NoError(t, err, "%s: %v", c.name, a)
			// Winograd's transforms lose precision with the tile size (measured on the
			// H200 for 5×5 filters, non-fused: 5e-4 of the products' magnitude).
			loose := 1.0
			if a == cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == cudnnraw.CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED {
				loose = 10
			}
			t.Run(c.name+"/"+a.String(), func(t *testing.T) {
				checkConvTol[float32](t, s, c, uint64(a), loose, cudnn.Algorithm(a))
			})
			ran++
		}
		assert.Positive(t, ran, "%s: no algorithm ran", c.name)
	}
	assert.Positive(t, cudnn.MaxCachedWorkspaceForTest(ctx), "no algorithm needed a workspace: the pool path was not taken")

	// TF32: about 10 bits of mantissa in the products.
	c := convCases[4]
	r := rand.New(rand.NewPCG(11, 11))
	ys, _ := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
	x, xRef := randoms[float32](r, c.x.Len())
	w, wRef := randoms[float32](r, c.w.Len())
	dY := cudatest.AllocFrom(t, s, make([]float32, ys.Len()))
	require.NoError(t, cudnn.Convolve[float32](s, c.conv, 1, cudatest.AllocFrom(t, s, x), c.x, cudatest.AllocFrom(t, s, w), c.w, 0, dY, cudnn.TensorCores()))
	got := toF64(cudatest.Read[float32](t, dY, ys.Len()))
	want, scale := convRef(c, xRef, wRef, 1, 0, nil)
	for i := range want {
		require.InDelta(t, want[i], got[i], 4e-3*scale[i]+1e-5, "TF32 y[%d]", i)
	}
}

// A workspace limit of 0 still finds an algorithm (implicit GEMM needs none).
func TestConvolveWithoutWorkspace(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	checkConv[float32](t, s, convCases[2], 21, cudnn.WorkspaceLimit(0))
	checkConv[float64](t, s, convCases[4], 22, cudnn.WorkspaceLimit(0), cudnn.FindAlgorithm())
}
