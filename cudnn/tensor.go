package cudnn

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// Float is an element type of the operations: float32 or float64 (CUDNN_DATA_FLOAT,
// CUDNN_DATA_DOUBLE). The scaling factors alpha and beta have the same type.
type Float interface {
	float32 | float64
}

// Tensor4D is the shape of a packed NCHW tensor: N images of C channels of H rows of
// W elements, element (n, c, h, w) at index ((n·C + c)·H + h)·W + w. Its element type
// is the operation's type parameter. Every size must be positive.
type Tensor4D struct {
	N, C, H, W int
}

// Len returns the number of elements, N·C·H·W.
func (t Tensor4D) Len() int { return t.N * t.C * t.H * t.W }

// String returns the shape as "N×C×H×W".
func (t Tensor4D) String() string { return fmt.Sprintf("%d×%d×%d×%d", t.N, t.C, t.H, t.W) }

// Filter is the shape of a packed KCRS convolution filter: K output channels of C
// input channels of R rows of S elements, element (k, c, r, s) at index
// ((k·C + c)·R + r)·S + s. Every size must be positive.
type Filter struct {
	K, C, R, S int
}

// Len returns the number of elements, K·C·R·S.
func (f Filter) Len() int { return f.K * f.C * f.R * f.S }

// String returns the shape as "K×C×R×S".
func (f Filter) String() string { return fmt.Sprintf("%d×%d×%d×%d", f.K, f.C, f.R, f.S) }

// maxInt32 bounds every size and element count: cuDNN's legacy API takes int.
const maxInt32 = 1<<31 - 1

// checkDims checks four sizes that make a tensor or filter: each positive, and their
// product (the element count) within int32.
func checkDims(what string, d [4]int) error {
	n := 1
	for _, v := range d {
		if v <= 0 || v > maxInt32 || n > maxInt32/v {
			return fmt.Errorf("%w: %s: sizes must be positive, with at most %d elements", cuda.ErrInvalidArgument, what, maxInt32)
		}
		n *= v
	}
	return nil
}

func (t Tensor4D) check(name string) error {
	return checkDims(fmt.Sprintf("%s is %v", name, t), [4]int{t.N, t.C, t.H, t.W})
}

func (f Filter) check(name string) error {
	return checkDims(fmt.Sprintf("%s is %v", name, f), [4]int{f.K, f.C, f.R, f.S})
}

// operand checks that m is memory of T (or untyped), open and of s's context
// (cuda.CheckEnqueue), with room for need elements, and returns its address. s has
// been checked.
func operand[T Float](s *cuda.Stream, name string, m cuda.Memory, need int) (unsafe.Pointer, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: %s is nil", cuda.ErrInvalidArgument, name)
	}
	p, err := cuda.DevicePtr[T](m) // also nil and zero buffers
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cuda.CheckEnqueue(s, cuda.Reads(m)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if size := elemSize[T](); m.Size()/size < need {
		return nil, fmt.Errorf("%w: %s needs %d elements of %v, the memory holds %d",
			cuda.ErrInvalidArgument, name, need, reflect.TypeFor[T](), m.Size()/size)
	}
	return unsafe.Pointer(p), nil
}

func elemSize[T Float]() int { return int(unsafe.Sizeof(*new(T))) }

// dataType is T's cuDNN data type.
func dataType[T Float]() cudnnraw.CudnnDataType {
	dt, _ := cudalib.DataType[T]() // every Float has one
	return dataTypes[dt]
}

// dataTypes are cuDNN's names of the Float types, by their CUDA data types.
var dataTypes = cudalib.ByDataType[cudnnraw.CudnnDataType]{
	cudaraw.CUDA_R_32F: cudnnraw.CUDNN_DATA_FLOAT,
	cudaraw.CUDA_R_64F: cudnnraw.CUDNN_DATA_DOUBLE,
}

// Descriptors: the operations describe their operands to cuDNN with descriptors made
// for the call and destroyed when it has been queued. They are host-side (cuDNN
// copies what a kernel needs when it is launched, and their destruction does not
// wait for the GPU, measured by tools/blockprobe), so they are made with the raw
// functions, outside any context, and never outlive the call: nothing for a
// finalizer to release.

// descs collects the descriptors of one call, destroyed together.
type descs []func() error

// destroy destroys the descriptors, newest first. A destroy of a host-side
// descriptor that was made fails only on a bad handle: nothing to report.
func (d descs) destroy() {
	for i := len(d) - 1; i >= 0; i-- {
		_ = d[i]()
	}
}

// tensor makes a descriptor of a packed NCHW tensor of dt.
func (d *descs) tensor(dt cudnnraw.CudnnDataType, t Tensor4D) (cudnnraw.CudnnTensorDescriptor, error) {
	var td cudnnraw.CudnnTensorDescriptor
	if err := cudnnraw.CreateTensorDescriptor(&td); err != nil {
		return 0, err
	}
	*d = append(*d, func() error { return cudnnraw.DestroyTensorDescriptor(td) })
	return td, cudnnraw.SetTensor4dDescriptor(td, cudnnraw.CUDNN_TENSOR_NCHW, dt, int32(t.N), int32(t.C), int32(t.H), int32(t.W))
}

// filter makes a descriptor of a packed KCRS filter of dt.
func (d *descs) filter(dt cudnnraw.CudnnDataType, f Filter) (cudnnraw.CudnnFilterDescriptor, error) {
	var fd cudnnraw.CudnnFilterDescriptor
	if err := cudnnraw.CreateFilterDescriptor(&fd); err != nil {
		return 0, err
	}
	*d = append(*d, func() error { return cudnnraw.DestroyFilterDescriptor(fd) })
	return fd, cudnnraw.SetFilter4dDescriptor(fd, dt, cudnnraw.CUDNN_TENSOR_NCHW, int32(f.K), int32(f.C), int32(f.R), int32(f.S))
}

// convolution makes a descriptor of c (checked) computing in dt.
func (d *descs) convolution(dt cudnnraw.CudnnDataType, c Conv) (cudnnraw.CudnnConvolutionDescriptor, error) {
	var cd cudnnraw.CudnnConvolutionDescriptor
	if err := cudnnraw.CreateConvolutionDescriptor(&cd); err != nil {
		return 0, err
	}
	*d = append(*d, func() error { return cudnnraw.DestroyConvolutionDescriptor(cd) })
	sh, sw := or1(c.StrideH), or1(c.StrideW)
	dh, dw := or1(c.DilationH), or1(c.DilationW)
	return cd, cudnnraw.SetConvolution2dDescriptor(cd, int32(c.PadH), int32(c.PadW), int32(sh), int32(sw), int32(dh), int32(dw), c.Mode.cudnn(), dt)
}

// activation makes a descriptor of a (checked).
func (d *descs) activation(a Activation) (cudnnraw.CudnnActivationDescriptor, error) {
	var ad cudnnraw.CudnnActivationDescriptor
	if err := cudnnraw.CreateActivationDescriptor(&ad); err != nil {
		return 0, err
	}
	*d = append(*d, func() error { return cudnnraw.DestroyActivationDescriptor(ad) })
	nan := cudnnraw.CUDNN_NOT_PROPAGATE_NAN
	if a.PropagateNaN {
		nan = cudnnraw.CUDNN_PROPAGATE_NAN
	}
	return ad, cudnnraw.SetActivationDescriptor(ad, a.Mode, nan, a.Coef)
}
