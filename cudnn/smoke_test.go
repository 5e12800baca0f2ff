package cudnn_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/dl"
)

// TestSmokeActivation runs a ReLU activation forward on a 2x3x4x5 NCHW float
// tensor and compares it with the CPU; it also reads the version and an error
// string from the library.
func TestSmokeActivation(t *testing.T) {
	g := cudatest.Require(t)
	cudatest.RequireLibrary(t, cudnnraw.Library())

	ver, err := cudnnraw.GetVersion()
	require.NoError(t, err)
	t.Logf("cuDNN version %d (headers %d)", ver, cudnnraw.CUDNN_VERSION)
	assert.GreaterOrEqual(t, ver, uint64(90000))
	s, err := cudnnraw.GetErrorString(cudnnraw.CUDNN_STATUS_BAD_PARAM)
	require.NoError(t, err)
	assert.Equal(t, "CUDNN_STATUS_BAD_PARAM", s)

	h, err := cudnnraw.NewOwnedHandle()
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Close()) }()

	const n, c, hh, w = 2, 3, 4, 5
	td, err := cudnnraw.NewOwnedTensorDescriptor()
	require.NoError(t, err)
	defer func() { assert.NoError(t, td.Close()) }()
	require.NoError(t, cudnnraw.SetTensor4dDescriptor(td.Handle(), cudnnraw.CUDNN_TENSOR_NCHW, cudnnraw.CUDNN_DATA_FLOAT, n, c, hh, w))

	ad, err := cudnnraw.NewOwnedActivationDescriptor()
	require.NoError(t, err)
	defer func() { assert.NoError(t, ad.Close()) }()
	require.NoError(t, cudnnraw.SetActivationDescriptor(ad.Handle(), cudnnraw.CUDNN_ACTIVATION_RELU, cudnnraw.CUDNN_NOT_PROPAGATE_NAN, 0))

	x := cudatest.RandFloat32s(cudatest.Rand(5), n*c*hh*w)
	dX := cudatest.Float32sToDevice(t, g, x)
	dY := cudatest.Alloc[float32](t, g, len(x))
	alpha, beta := float32(1), float32(0)
	require.NoError(t, cudnnraw.ActivationForward(h.Handle(), ad.Handle(), unsafe.Pointer(&alpha), td.Handle(), cudatest.DevUnsafe(dX),
		unsafe.Pointer(&beta), td.Handle(), cudatest.DevUnsafe(dY)))
	y := cudatest.Float32sFromDevice(t, dY, len(x))

	var zeros, mismatches int
	for i, v := range x {
		want := max(v, 0)
		if want == 0 {
			zeros++
		}
		if y[i] != want {
			mismatches++
			t.Errorf("y[%d] = %v, want ReLU(%v) = %v", i, y[i], v, want)
		}
	}
	t.Logf("ReLU forward on %dx%dx%dx%d: %d/%d elements exact (%d clamped to 0)", n, c, hh, w, len(x)-mismatches, len(x), zeros)

	// A failing call returns the Status as an error.
	err = cudnnraw.SetTensor4dDescriptor(td.Handle(), cudnnraw.CUDNN_TENSOR_NCHW, cudnnraw.CUDNN_DATA_FLOAT, -1, c, hh, w)
	require.Error(t, err)
	var st cudnnraw.Status
	require.True(t, errors.As(err, &st), "got %T %v", err, err)
	assert.Equal(t, cudnnraw.CUDNN_STATUS_BAD_PARAM, st)
}

// boundSymbols returns every C function name that zz_generated_funcs.go binds
// (its library.NewProc("...") calls), parsed from the source.
func boundSymbols(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("cudnnraw", "zz_generated_funcs.go"), nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "NewProc" {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "library" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		require.NoError(t, err)
		names = append(names, s)
		return true
	})
	sort.Strings(names)
	return names
}

// TestSmokeSymbolNewerThanLibrary looks up, in the loaded libcudnn, every
// function the package binds (the library.NewProc calls of
// zz_generated_funcs.go, parsed from the source). A library older than the
// headers may lack some: each such lookup must give a *dl.SymbolError naming
// the library, soname, symbol and loaded file, never a crash. The generated
// functions reach C only through these lookups; TestSymbolErrorFromGeneratedCall
// (nolib_test.go) calls them against a library that lacks every symbol.
//
// Seen on the GPU machine: cuDNN 9.14.0 exports all 220 functions bound from
// the 9.19 headers, so there a lookup of a name it lacks stands in for them.
func TestSmokeSymbolNewerThanLibrary(t *testing.T) {
	cudatest.RequireLibrary(t, cudnnraw.Library())
	ver, err := cudnnraw.GetVersion()
	require.NoError(t, err)
	path, err := cudnnraw.Library().Path()
	require.NoError(t, err)

	checkSymbolError := func(err error, name string) {
		t.Helper()
		var se *dl.SymbolError
		require.True(t, errors.As(err, &se), "%s: %T %v", name, err, err)
		assert.True(t, errors.Is(err, dl.ErrSymbolNotFound))
		assert.False(t, errors.Is(err, dl.ErrLibraryNotFound))
		assert.Equal(t, "cudnn", se.Library)
		assert.Equal(t, cudnnraw.Soname, se.Soname)
		assert.Equal(t, name, se.Symbol)
		assert.Equal(t, path, se.Path)
		assert.Contains(t, err.Error(), name)
		assert.Contains(t, err.Error(), cudnnraw.Soname)
	}

	names := boundSymbols(t)
	require.Greater(t, len(names), 100, "parsed too few NewProc calls from zz_generated_funcs.go")
	var missing []string
	for _, name := range names {
		if err := cudnnraw.Library().NewProc(name).Find(); err != nil {
			checkSymbolError(err, name)
			missing = append(missing, name)
		}
	}
	t.Logf("cuDNN %d (headers %d) at %s: %d of %d bound functions missing %v",
		ver, cudnnraw.CUDNN_VERSION, path, len(missing), len(names), missing)
	if ver >= cudnnraw.CUDNN_VERSION {
		assert.Empty(t, missing, "a library as new as the headers should export every bound function")
	}

	const absent = "cudnnGocudaNoSuchFunction"
	err = cudnnraw.Library().NewProc(absent).Find()
	require.Error(t, err)
	checkSymbolError(err, absent)
	t.Logf("lookup of a symbol the library lacks: %v", err)
}
