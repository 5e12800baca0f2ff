package cudalib

import (
	"unsafe"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
)

// DataType returns the CUDA data type (cudaDataType, library_types.h) of elements of
// T, and false for a type that has none. int8, uint8, int16, uint16, int32, uint32,
// int64, uint64, cuda.Float16, cuda.BFloat16, float32 and float64 have a real one;
// complex64 and complex128, of the layout of cuComplex and cuDoubleComplex, a
// complex one. Types defined on these (type Celsius float32) have none.
//
// It is the one place where a wrapper turns its element type into something CUDA
// names: the cudaDataType arguments of the libraries that take one, and the index
// into a ByDataType table for the rest.
func DataType[T any]() (cudaraw.CudaDataType, bool) {
	switch any(*new(T)).(type) {
	case float32:
		return cudaraw.CUDA_R_32F, true
	case float64:
		return cudaraw.CUDA_R_64F, true
	case complex64:
		return cudaraw.CUDA_C_32F, true
	case complex128:
		return cudaraw.CUDA_C_64F, true
	case cuda.Float16:
		return cudaraw.CUDA_R_16F, true
	case cuda.BFloat16:
		return cudaraw.CUDA_R_16BF, true
	case int8:
		return cudaraw.CUDA_R_8I, true
	case uint8:
		return cudaraw.CUDA_R_8U, true
	case int16:
		return cudaraw.CUDA_R_16I, true
	case uint16:
		return cudaraw.CUDA_R_16U, true
	case int32:
		return cudaraw.CUDA_R_32I, true
	case uint32:
		return cudaraw.CUDA_R_32U, true
	case int64:
		return cudaraw.CUDA_R_64I, true
	case uint64:
		return cudaraw.CUDA_R_64U, true
	}
	return 0, false
}

// ByDataType is a table of values by element type, indexed by the types' DataType:
// a library's own names of the element types (NCCL's ncclDataType_t), or a wrapper's
// per-precision rows (its S, D, C and Z routines, typed in each element type, as
// values of type any), so that adding a type or a routine adds an entry to a table
// rather than a case to a type switch. It has room for every data type that
// DataType returns.
type ByDataType[V any] [cudaraw.CUDA_R_64U + 1]V

// Row returns T's entry of t as an R — a wrapper's row of routines typed in T, say
// *routines[T] — and false when T has no data type, no entry, or an entry of
// another type (a table of rows typed in two element types, such as a real type and
// its complex partner, finds none for a mismatched pair).
func Row[R, T any](t *ByDataType[any]) (R, bool) {
	var zero R
	dt, ok := DataType[T]()
	if !ok {
		return zero, false
	}
	r, ok := t[dt].(R)
	return r, ok
}

// Retype returns p as a pointer to R, a type of T's layout (complex64 and
// cuComplex): the same memory, for a row that calls the raw routines of R with
// memory of T.
func Retype[R, T any](p *T) *R { return (*R)(unsafe.Pointer(p)) }
