package cudnn_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// elemTolerance is the error allowed for an elementwise result want: float32 with
// room for fast exponentials, float64 tight.
func elemTolerance[T cudnn.Float](want float64) float64 {
	if isFloat32[T]() {
		return 2e-5 * (1 + math.Abs(want))
	}
	return 1e-12 * (1 + math.Abs(want))
}

// checkClose fails t for the elements of got farther from want than elemTolerance.
func checkClose[T cudnn.Float](t *testing.T, what string, got []T, want []float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= elemTolerance[T](want[i])) {
			if bad++; bad <= 5 {
				t.Errorf("%T %s: [%d] = %v, want %v", got[0], what, i, got[i], want[i])
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d elements wrong of %d", bad, len(want))
	}
}

// activationRef is f(v) in float64.
func activationRef(f cudnn.Activation, v float64) float64 {
	switch f.Mode {
	case cudnn.Sigmoid:
		return 1 / (1 + math.Exp(-v))
	case cudnn.ReLU:
		return max(v, 0)
	case cudnn.Tanh:
		return math.Tanh(v)
	case cudnn.ClippedReLU:
		return min(max(v, 0), f.Coef)
	case cudnn.ELU:
		if v > 0 {
			return v
		}
		return f.Coef * (math.Exp(v) - 1)
	}
	panic(f.Mode)
}

var activations = []cudnn.Activation{
	{Mode: cudnn.Sigmoid},
	{Mode: cudnn.ReLU},
	{Mode: cudnn.Tanh},
	{Mode: cudnn.ClippedReLU, Coef: 0.5},
	{Mode: cudnn.ELU, Coef: 0.7},
}

func checkActivations[T cudnn.Float](t *testing.T, s *cuda.Stream) {
	shape := cudnn.Tensor4D{N: 2, C: 3, H: 4, W: 5}
	r := rand.New(rand.NewPCG(4, 4))
	for _, f := range activations {
		x, xRef := randoms[T](r, shape.Len())
		for i := range x { // [-3, 3): past the clipping and into the tails
			x[i] *= 3
			xRef[i] = float64(x[i])
		}
		dX := cudatest.AllocFrom(t, s, x)
		for _, ab := range [][2]float64{{1, 0}, {2, 0.5}} {
			alpha, beta := ab[0], ab[1]
			y0, y0Ref := randoms[T](r, shape.Len())
			if beta == 0 {
				y0 = nans[T](shape.Len())
			}
			dY := cudatest.AllocFrom(t, s, y0)
			require.NoError(t, cudnn.Activate(s, f, shape, T(alpha), dX, T(beta), dY))
			want := make([]float64, len(x))
			for i, v := range xRef {
				want[i] = alpha * activationRef(f, v)
				if beta != 0 {
					want[i] += beta * y0Ref[i]
				}
			}
			checkClose(t, fmt.Sprintf("%v(coef %v) alpha %v beta %v", f.Mode, f.Coef, alpha, beta), cudatest.Read[T](t, dY, len(x)), want)
		}
		// In place.
		require.NoError(t, cudnn.Activate(s, f, shape, T(1), dX, T(0), dX))
		want := make([]float64, len(x))
		for i, v := range xRef {
			want[i] = activationRef(f, v)
		}
		checkClose(t, fmt.Sprintf("%v in place", f.Mode), cudatest.Read[T](t, dX, len(x)), want)
	}
}

// Every activation function, with and without beta and in place, against the CPU.
func TestActivate(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	checkActivations[float32](t, s)
	checkActivations[float64](t, s)
}

// softmaxRef is softmax (or log softmax) of x over the instance or the channels, in
// float64.
func softmaxRef(shape cudnn.Tensor4D, algo cudnnraw.CudnnSoftmaxAlgorithm, mode cudnnraw.CudnnSoftmaxMode, x []float64) []float64 {
	out := make([]float64, len(x))
	// groups lists the indices of each softmax: an image, or a pixel's channels.
	var groups [][]int
	hw := shape.H * shape.W
	for n := range shape.N {
		if mode == cudnn.SoftmaxInstance {
			g := make([]int, 0, shape.C*hw)
			for i := range shape.C * hw {
				g = append(g, n*shape.C*hw+i)
			}
			groups = append(groups, g)
			continue
		}
		for p := range hw {
			g := make([]int, 0, shape.C)
			for c := range shape.C {
				g = append(g, (n*shape.C+c)*hw+p)
			}
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		m := math.Inf(-1)
		for _, i := range g {
			m = max(m, x[i])
		}
		var sum float64
		for _, i := range g {
			sum += math.Exp(x[i] - m)
		}
		for _, i := range g {
			if algo == cudnn.SoftmaxLog {
				out[i] = x[i] - m - math.Log(sum)
			} else {
				out[i] = math.Exp(x[i]-m) / sum
			}
		}
	}
	return out
}

func checkSoftmax[T cudnn.Float](t *testing.T, s *cuda.Stream) {
	shape := cudnn.Tensor4D{N: 2, C: 5, H: 3, W: 4}
	r := rand.New(rand.NewPCG(5, 5))
	for _, algo := range []cudnnraw.CudnnSoftmaxAlgorithm{cudnn.SoftmaxAccurate, cudnn.SoftmaxLog, cudnn.SoftmaxFast} {
		for _, mode := range []cudnnraw.CudnnSoftmaxMode{cudnn.SoftmaxInstance, cudnn.SoftmaxChannel} {
			x, xRef := randoms[T](r, shape.Len())
			for i := range x {
				x[i] *= 3
				xRef[i] = float64(x[i])
			}
			dX := cudatest.AllocFrom(t, s, x)
			ref := softmaxRef(shape, algo, mode, xRef)
			for _, ab := range [][2]float64{{1, 0}, {0.5, 2}} {
				alpha, beta := ab[0], ab[1]
				y0, y0Ref := randoms[T](r, shape.Len())
				if beta == 0 {
					y0 = nans[T](shape.Len())
				}
				dY := cudatest.AllocFrom(t, s, y0)
				require.NoError(t, cudnn.Softmax(s, algo, mode, shape, T(alpha), dX, T(beta), dY))
				want := make([]float64, len(ref))
				for i := range ref {
					want[i] = alpha * ref[i]
					if beta != 0 {
						want[i] += beta * y0Ref[i]
					}
				}
				checkClose(t, fmt.Sprintf("%v %v alpha %v beta %v", algo, mode, alpha, beta), cudatest.Read[T](t, dY, len(want)), want)
			}
		}
	}
}

// Softmax and log softmax, per image and per pixel, against the CPU.
func TestSoftmax(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	checkSoftmax[float32](t, s)
	checkSoftmax[float64](t, s)
}

func checkAddBias[T cudnn.Float](t *testing.T, s *cuda.Stream) {
	shape := cudnn.Tensor4D{N: 2, C: 4, H: 3, W: 5}
	r := rand.New(rand.NewPCG(6, 6))
	b, bRef := randoms[T](r, shape.C)
	dB := cudatest.AllocFrom(t, s, b)
	for _, ab := range [][2]float64{{1, 1}, {2, 0}, {-1, 0.25}} {
		alpha, beta := ab[0], ab[1]
		y0, y0Ref := randoms[T](r, shape.Len())
		if beta == 0 {
			y0 = nans[T](shape.Len())
		}
		dY := cudatest.AllocFrom(t, s, y0)
		require.NoError(t, cudnn.AddBias(s, shape, T(alpha), dB, T(beta), dY))
		want := make([]float64, shape.Len())
		for i := range want {
			c := i / (shape.H * shape.W) % shape.C
			want[i] = alpha * bRef[c]
			if beta != 0 {
				want[i] += beta * y0Ref[i]
			}
		}
		checkClose(t, fmt.Sprintf("add bias alpha %v beta %v", alpha, beta), cudatest.Read[T](t, dY, len(want)), want)
	}
}

// A bias per channel, broadcast, against the CPU.
func TestAddBias(t *testing.T) {
	_, s := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	checkAddBias[float32](t, s)
	checkAddBias[float64](t, s)
}

// 32 goroutines convolve at once on pooled streams, a few shapes each, half of them
// choosing by Find (the goroutines that need a key being chosen wait for it), each
// checking its results; the handle cache keeps at most MaxIdleHandles afterwards.
func TestConcurrentConvolve(t *testing.T) {
	ctx, _ := setup(t, cudatest.Kernels)
	cudatest.RequireLibrary(t, cudnnraw.Library())
	cases := []convCase{convCases[0], convCases[2], convCases[6]}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			err := ctx.WithStream(context.Background(), func(_ context.Context, s *cuda.Stream) error {
				return convolveAndCheck(s, g, cases)
			})
			assert.NoError(t, err, "goroutine %d", g)
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, cudnn.IdleHandlesForTest(ctx), cudnn.MaxIdleHandles)
}

// convolveAndCheck is one goroutine of TestConcurrentConvolve: it returns an error
// for a failure or a wrong element (t.FailNow is for the test's goroutine only).
func convolveAndCheck(s *cuda.Stream, g int, cases []convCase) error {
	r := rand.New(rand.NewPCG(uint64(g), 32))
	var opts []cudnn.ConvOption
	loose := 1.0
	if g%2 == 1 {
		opts = append(opts, cudnn.FindAlgorithm())
		loose = 10 // Find may pick Winograd (TestConvolveAlgorithms)
	}
	upload := func(v []float32) (*cuda.DeviceBuffer, error) {
		b, err := cuda.AllocFor[float32](s, len(v))
		if err != nil {
			return nil, err
		}
		if err := cuda.CopyToDeviceAsync(s, b, v); err != nil {
			b.Close()
			return nil, err
		}
		return b, nil
	}
	for i := range 4 {
		c := cases[(g+i)%len(cases)]
		ys, err := cudnn.ConvolutionOutputShape(c.x, c.w, c.conv)
		if err != nil {
			return err
		}
		x, xRef := randoms[float32](r, c.x.Len())
		w, wRef := randoms[float32](r, c.w.Len())
		dX, err := upload(x)
		if err != nil {
			return err
		}
		defer dX.Close()
		dW, err := upload(w)
		if err != nil {
			return err
		}
		defer dW.Close()
		dY, err := cuda.AllocFor[float32](s, ys.Len())
		if err != nil {
			return err
		}
		defer dY.Close()
		if err := cudnn.Convolve[float32](s, c.conv, 1, dX, c.x, dW, c.w, 0, dY, opts...); err != nil {
			return err
		}
		got := make([]float32, ys.Len())
		if err := cuda.CopyFromDevice(got, dY); err != nil {
			return err
		}
		want, scale := convRef(c, xRef, wRef, 1, 0, nil)
		for j := range want {
			if d := math.Abs(float64(got[j]) - want[j]); !(d <= loose*convTolerance[float32](scale[j])) {
				return fmt.Errorf("%s, round %d: y[%d] = %v, want %v", c.name, i, j, got[j], want[j])
			}
		}
	}
	return nil
}
