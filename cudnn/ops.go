package cudnn

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
)

// ActivationMode is an activation function.
type ActivationMode = cudnnraw.CudnnActivationMode

// Activation functions (the modes of Activation).
const (
	Sigmoid     ActivationMode = cudnnraw.CUDNN_ACTIVATION_SIGMOID      // 1 / (1 + e⁻ˣ)
	ReLU                       = cudnnraw.CUDNN_ACTIVATION_RELU         // max(x, 0)
	Tanh                       = cudnnraw.CUDNN_ACTIVATION_TANH         // tanh(x)
	ClippedReLU                = cudnnraw.CUDNN_ACTIVATION_CLIPPED_RELU // min(max(x, 0), Coef)
	ELU                        = cudnnraw.CUDNN_ACTIVATION_ELU          // x if x > 0, else Coef·(eˣ − 1)
)

// Activation is an activation function: Mode (Sigmoid, ReLU, Tanh, ClippedReLU or
// ELU) and its coefficient, the ceiling of ClippedReLU (positive) or the α of ELU.
// NaN inputs give NaN outputs if PropagateNaN, else what the function computes for
// them (CUDNN_NOT_PROPAGATE_NAN).
type Activation struct {
	Mode         ActivationMode
	Coef         float64
	PropagateNaN bool
}

func (a Activation) check() error {
	switch a.Mode {
	case Sigmoid, ReLU, Tanh:
		return nil
	case ClippedReLU:
		if !(a.Coef > 0) || math.IsInf(a.Coef, 0) {
			return fmt.Errorf("%w: clipped ReLU needs a positive ceiling (Coef), not %v", cuda.ErrInvalidArgument, a.Coef)
		}
		return nil
	case ELU:
		if math.IsNaN(a.Coef) || math.IsInf(a.Coef, 0) {
			return fmt.Errorf("%w: ELU coefficient %v", cuda.ErrInvalidArgument, a.Coef)
		}
		return nil
	}
	return fmt.Errorf("%w: activation mode %v (Sigmoid, ReLU, Tanh, ClippedReLU or ELU)", cuda.ErrInvalidArgument, a.Mode)
}

// SoftmaxAlgorithm is how Softmax computes: SoftmaxFast, SoftmaxAccurate or SoftmaxLog.
type SoftmaxAlgorithm = cudnnraw.CudnnSoftmaxAlgorithm

// SoftmaxMode is what Softmax normalizes over: SoftmaxInstance or SoftmaxChannel.
type SoftmaxMode = cudnnraw.CudnnSoftmaxMode

// Softmax algorithms and modes.
const (
	SoftmaxFast     SoftmaxAlgorithm = cudnnraw.CUDNN_SOFTMAX_FAST          // e^x / Σ e^x, without subtracting the maximum
	SoftmaxAccurate                  = cudnnraw.CUDNN_SOFTMAX_ACCURATE      // e^(x−max) / Σ e^(x−max)
	SoftmaxLog                       = cudnnraw.CUDNN_SOFTMAX_LOG           // log softmax: x − max − log Σ e^(x−max)
	SoftmaxInstance SoftmaxMode      = cudnnraw.CUDNN_SOFTMAX_MODE_INSTANCE // over C·H·W, for each image
	SoftmaxChannel                   = cudnnraw.CUDNN_SOFTMAX_MODE_CHANNEL  // over C, for each image, row and column
)

// Activate computes y = alpha·f(x) + beta·y on s for the activation f, where x and y
// are shape-shaped tensors of T: cudnnActivationForward. y may be x (in place), but
// must not partly overlap it; with beta 0, y is not read. Errors are as Convolve's,
// named "cudnn: activation forward: ...".
func Activate[T Float](s *cuda.Stream, f Activation, shape Tensor4D, alpha T, x cuda.Memory, beta T, y cuda.Memory) error {
	const op = "activation forward"
	if err := f.check(); err != nil {
		return wrap(op, err)
	}
	px, py, err := unary[T](s, shape, x, y, true)
	if err != nil {
		return wrap(op, err)
	}
	var d descs
	defer d.destroy()
	ad, err := d.activation(f)
	if err != nil {
		return wrap(op, err)
	}
	td, err := d.tensor(dataType[T](), shape)
	if err != nil {
		return wrap(op, err)
	}
	return call(op, s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		return cudnnraw.ActivationForwardIn(c, h, ad, unsafe.Pointer(&alpha), td, px, unsafe.Pointer(&beta), td, py)
	}, cuda.Reads(x), cuda.Writes(y))
}

// Softmax computes y = alpha·softmax(x) + beta·y on s, where x and y are
// shape-shaped tensors of T, with algo SoftmaxAccurate, SoftmaxLog or SoftmaxFast,
// over each image (mode SoftmaxInstance) or over the channels of each pixel
// (SoftmaxChannel): cudnnSoftmaxForward. y must not overlap x; with beta 0, y is not
// read. Errors are as Convolve's, named "cudnn: softmax forward: ...".
func Softmax[T Float](s *cuda.Stream, algo SoftmaxAlgorithm, mode SoftmaxMode, shape Tensor4D, alpha T, x cuda.Memory,
	beta T, y cuda.Memory) error {
	const op = "softmax forward"
	if algo != SoftmaxFast && algo != SoftmaxAccurate && algo != SoftmaxLog {
		return wrap(op, fmt.Errorf("%w: softmax algorithm %v", cuda.ErrInvalidArgument, algo))
	}
	if mode != SoftmaxInstance && mode != SoftmaxChannel {
		return wrap(op, fmt.Errorf("%w: softmax mode %v", cuda.ErrInvalidArgument, mode))
	}
	// In place is not documented for cudnnSoftmaxForward: refused.
	px, py, err := unary[T](s, shape, x, y, false)
	if err != nil {
		return wrap(op, err)
	}
	var d descs
	defer d.destroy()
	td, err := d.tensor(dataType[T](), shape)
	if err != nil {
		return wrap(op, err)
	}
	return call(op, s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		return cudnnraw.SoftmaxForwardIn(c, h, algo, mode, unsafe.Pointer(&alpha), td, px, unsafe.Pointer(&beta), td, py)
	}, cuda.Reads(x), cuda.Writes(y))
}

// AddBias computes y = alpha·bias + beta·y on s, where y is a shape-shaped tensor of T
// and bias holds shape.C elements of T, one per channel, broadcast over the images,
// rows and columns: cudnnAddTensor. With alpha and beta 1 it adds a convolution's
// bias in place. bias must not overlap y. Errors are as Convolve's, named "cudnn: add
// bias: ...".
func AddBias[T Float](s *cuda.Stream, shape Tensor4D, alpha T, bias cuda.Memory, beta T, y cuda.Memory) error {
	const op = "add bias"
	if err := shape.check("y"); err != nil {
		return wrap(op, err)
	}
	if err := cuda.CheckEnqueue(s); err != nil {
		return wrap(op, err)
	}
	pb, err := operand[T](s, "bias", bias, shape.C)
	if err != nil {
		return wrap(op, err)
	}
	py, err := operand[T](s, "y", y, shape.Len())
	if err != nil {
		return wrap(op, err)
	}
	size := elemSize[T]()
	if overlap(pb, shape.C*size, py, shape.Len()*size) {
		return wrap(op, fmt.Errorf("%w: bias overlaps y", cuda.ErrInvalidArgument))
	}
	dt := dataType[T]()
	var d descs
	defer d.destroy()
	bd, err := d.tensor(dt, Tensor4D{N: 1, C: shape.C, H: 1, W: 1})
	if err != nil {
		return wrap(op, err)
	}
	yd, err := d.tensor(dt, shape)
	if err != nil {
		return wrap(op, err)
	}
	return call(op, s, func(c cudaraw.CUcontext, h cudnnraw.CudnnHandle) error {
		return cudnnraw.AddTensorIn(c, h, unsafe.Pointer(&alpha), bd, pb, unsafe.Pointer(&beta), yd, py)
	}, cuda.Reads(bias), cuda.Writes(y))
}

// unary checks the operands of an elementwise operation: x and y shape-shaped tensors
// of T of s's context, y either x itself (if inPlace) or apart from it.
func unary[T Float](s *cuda.Stream, shape Tensor4D, x, y cuda.Memory, inPlace bool) (px, py unsafe.Pointer, err error) {
	if err := shape.check("x and y"); err != nil {
		return nil, nil, err
	}
	if err := cuda.CheckEnqueue(s); err != nil {
		return nil, nil, err
	}
	if px, err = operand[T](s, "x", x, shape.Len()); err != nil {
		return nil, nil, err
	}
	if py, err = operand[T](s, "y", y, shape.Len()); err != nil {
		return nil, nil, err
	}
	n := shape.Len() * elemSize[T]()
	if overlap(px, n, py, n) && !(inPlace && px == py) {
		if inPlace {
			return nil, nil, fmt.Errorf("%w: y overlaps x without being x", cuda.ErrInvalidArgument)
		}
		return nil, nil, fmt.Errorf("%w: y overlaps x", cuda.ErrInvalidArgument)
	}
	return px, py, nil
}
