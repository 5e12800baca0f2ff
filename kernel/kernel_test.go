package kernel_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/kernel"
)

// The kernel an Elementwise writes: loads into locals named as the parameters, the
// operation, the stores; scalars as values.
func TestElementwiseSource(t *testing.T) {
	e, err := kernel.NewElementwise("axpy", "y = a * x + y;", nil,
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"), kernel.Out[cuda.Float16]("h"))
	require.NoError(t, err)
	defer e.Close()
	src := e.Source()
	for _, want := range []string{
		`extern "C" __global__ void axpy(const long long _n, const float a, const float* _x, float* _y, __half* _h)`,
		"const float x = _x[_i];", "float y = _y[_i];", "__half h;", "y = a * x + y;", "_y[_i] = y;", "_h[_i] = h;",
	} {
		assert.Contains(t, src, want)
	}
	assert.NotContains(t, src, "_x[_i] = x", "inputs are not stored")
}

type celsius float32

func TestElementwiseErrors(t *testing.T) {
	for name, c := range map[string]struct {
		name, op string
		params   []kernel.Param
	}{
		"bad name":        {"1x", "y = x", []kernel.Param{kernel.In[float32]("x"), kernel.Out[float32]("y")}},
		"reserved name":   {"_k", "y = x", []kernel.Param{kernel.In[float32]("x"), kernel.Out[float32]("y")}},
		"empty operation": {"k", " ", []kernel.Param{kernel.Out[float32]("y")}},
		"no output":       {"k", "x", []kernel.Param{kernel.In[float32]("x")}},
		"twice":           {"k", "y = x", []kernel.Param{kernel.In[float32]("x"), kernel.Out[float32]("x")}},
		"bad param name":  {"k", "y = 1", []kernel.Param{kernel.Out[float32]("y z")}},
		"zero param":      {"k", "y = 1", []kernel.Param{{}, kernel.Out[float32]("y")}},
		"no C type":       {"k", "y = x", []kernel.Param{kernel.In[celsius]("x"), kernel.Out[float32]("y")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := kernel.NewElementwise(c.name, c.op, nil, c.params...)
			require.ErrorIs(t, err, cuda.ErrInvalidArgument)
		})
	}
	_, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Combine: "a + b"}, nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument, "no identity")
	_, err = kernel.NewReduction[celsius]("sum", kernel.ReductionOps{Identity: "0", Combine: "a + b"}, nil)
	require.ErrorIs(t, err, cuda.ErrInvalidArgument)
}

// Arguments are checked before anything is compiled or queued: their count, the
// scalars' types, the arrays' element types and lengths.
func TestElementwiseLaunchChecks(t *testing.T) {
	_, s := cudatest.Stream(t)
	restore := kernel.SetCompiler(func(string, string, string) ([]byte, error) {
		t.Error("nothing may be compiled for a launch with bad arguments")
		return nil, errors.New("no")
	}, "test")
	defer restore()
	e, err := kernel.NewElementwise("axpy", "y = a * x + y", &kernel.Cache{},
		kernel.Scalar[float32]("a"), kernel.In[float32]("x"), kernel.InOut[float32]("y"))
	require.NoError(t, err)
	x, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer x.Close()
	y8, err := cuda.AllocFor[float32](s, 8)
	require.NoError(t, err)
	defer y8.Close()
	y4, err := cuda.AllocFor[float32](s, 4)
	require.NoError(t, err)
	defer y4.Close()
	d, err := cuda.AllocFor[float64](s, 8)
	require.NoError(t, err)
	defer d.Close()
	for name, args := range map[string][]any{
		"count":        {float32(1), x},
		"scalar type":  {1.0, x, y8},
		"element type": {float32(1), d, y8},
		"not memory":   {float32(1), []float32{1}, y8},
		"lengths":      {float32(1), x, y4},
	} {
		require.ErrorIs(t, e.Launch(s, args...), cuda.ErrInvalidArgument, name)
	}
	require.ErrorIs(t, e.Launch(nil, float32(1), x, y8), cuda.ErrInvalidArgument)
	require.NoError(t, e.Close())
	require.ErrorIs(t, e.Close(), cuda.ErrClosed)

	sum, err := kernel.NewReduction[float32]("sum", kernel.ReductionOps{Identity: "0", Combine: "a + b"}, &kernel.Cache{})
	require.NoError(t, err)
	defer sum.Close()
	require.ErrorIs(t, sum.ReduceTo(s, d, x), cuda.ErrInvalidArgument, "element type")
	require.ErrorIs(t, sum.ReduceRows(s, x, 3, 3, y8), cuda.ErrInvalidArgument, "9 elements for 8")
	one, err := cuda.AllocFor[float32](s, 1)
	require.NoError(t, err)
	defer one.Close()
	require.ErrorIs(t, sum.ReduceRows(s, x, 2, 4, one), cuda.ErrInvalidArgument, "out holds 1 of 2 rows")
}
