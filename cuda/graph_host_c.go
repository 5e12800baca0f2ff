package cuda

/*
#include <stdint.h>
#include <stdlib.h>

extern void gocudaHostFn(void *);

// gocuda_hostfn is the CUhostFn of every host node: it calls back into Go.
static uintptr_t gocuda_hostfn(void) { return (uintptr_t)gocudaHostFn; }

// gocuda_hostfn_arg returns C memory holding id: a host node's user data, which the
// driver hands to gocuda_hostfn.
static void *gocuda_hostfn_arg(uintptr_t id) {
	uintptr_t *p = malloc(sizeof *p);
	if (p != NULL) *p = id;
	return p;
}
*/
import "C"

import (
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"unsafe"
)

// The C side of host nodes (graph_host.go). It is a file of its own because a file
// with //export, as graph_host.go is, may only declare C functions in its
// preamble, not define them.

// hostFnAddr is the address of the C function that calls host nodes' Go functions.
var hostFnAddr = cudaraw.CUhostFn(C.gocuda_hostfn())

// newHostFnArg returns C memory holding id (nil when out of memory).
func newHostFnArg(id uintptr) unsafe.Pointer { return C.gocuda_hostfn_arg(C.uintptr_t(id)) }

// freeHostFnArg frees what newHostFnArg returned.
func freeHostFnArg(p unsafe.Pointer) { C.free(p) }
