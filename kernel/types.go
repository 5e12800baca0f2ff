package kernel

import (
	"fmt"
	"reflect"

	"github.com/gocuda/gocuda/cuda"
)

// Element is a type of elements and scalars that kernels of this package take: Go's
// fixed-size numbers and cuda.Float16 and cuda.BFloat16.
type Element interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// cTypes names the C type of each element type.
var cTypes = map[reflect.Type]string{
	reflect.TypeFor[int8]():          "signed char",
	reflect.TypeFor[uint8]():         "unsigned char",
	reflect.TypeFor[int16]():         "short",
	reflect.TypeFor[uint16]():        "unsigned short",
	reflect.TypeFor[int32]():         "int",
	reflect.TypeFor[uint32]():        "unsigned int",
	reflect.TypeFor[int64]():         "long long",
	reflect.TypeFor[uint64]():        "unsigned long long",
	reflect.TypeFor[float32]():       "float",
	reflect.TypeFor[float64]():       "double",
	reflect.TypeFor[cuda.Float16]():  "__half",
	reflect.TypeFor[cuda.BFloat16](): "__nv_bfloat16",
}

// cType returns the C type of T: a Go number type, cuda.Float16 or cuda.BFloat16
// (types defined on them have none: their meaning is the program's).
func cType(t reflect.Type) (string, error) {
	if c, ok := cTypes[t]; ok {
		return c, nil
	}
	return "", fmt.Errorf("%w: %v has no C type (a kernel takes Go's number types, cuda.Float16 and cuda.BFloat16)",
		cuda.ErrInvalidArgument, t)
}
