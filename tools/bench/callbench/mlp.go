package callbench

/*
#include <stdint.h>

#include "clock.h"

// cublasSgemm_v2's shape, with the handle and device pointers as integers.
typedef int (*sgemm_fn)(uintptr_t, int, int, int, int, int, const float*, uintptr_t, int,
	uintptr_t, int, const float*, uintptr_t, int);
typedef int (*mlp_launch_fn)(uintptr_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	unsigned, uintptr_t, void**, void**);

// loop_mlp runs n passes of an MLP from C, as floor.cu's mlp_forward: per layer i,
// h[i+1] = w[i]·h[i] (cublasSgemm_v2, no transposes, width×width times width×batch),
// then, unless bias is 0, the kernel bias on stream with blocks×threads and
// kernelParams args[4i..4i+3].
static int64_t loop_mlp(uintptr_t sgemm, uintptr_t launch, uintptr_t handle, uintptr_t stream,
		uintptr_t bias, const uintptr_t* w, const uintptr_t* h, void** args, int layers,
		int width, int batch, unsigned blocks, unsigned threads, int64_t n) {
	static const float one = 1, zero = 0;
	sgemm_fn gemm = (sgemm_fn)sgemm;
	mlp_launch_fn lk = (mlp_launch_fn)launch;
	int64_t t0 = callbench_now_ns();
	for (int64_t p = 0; p < n; p++) {
		for (int i = 0; i < layers; i++) {
			if (gemm(handle, 0, 0, width, batch, width, &one, w[i], width, h[i], width, &zero, h[i + 1], width) != 0)
				return -1;
			if (bias && lk(bias, blocks, 1, 1, threads, 1, 1, 0, stream, &args[4 * i], NULL) != 0)
				return -1;
		}
	}
	return callbench_now_ns() - t0;
}

// The fakes the tests pass as cublasSgemm_v2 and cuLaunchKernel: they record what
// they were called with, and fail once fake_fail_at calls have been made.
static int64_t fake_calls, fake_fail_at = -1;
static uintptr_t fake_log[64][3];  // per call: (1: sgemm, 2: launch), A or kernel, C or params[0]
static void fake_note(uintptr_t kind, uintptr_t a, uintptr_t b) {
	if (fake_calls < 64) { fake_log[fake_calls][0] = kind; fake_log[fake_calls][1] = a; fake_log[fake_calls][2] = b; }
	fake_calls++;
}
static int fake_sgemm(uintptr_t h, int ta, int tb, int m, int n, int k, const float* alpha, uintptr_t A, int lda,
		uintptr_t B, int ldb, const float* beta, uintptr_t C, int ldc) {
	if (fake_calls == fake_fail_at) return 13;
	if (ta || tb || m != lda || k != m || *alpha != 1 || *beta != 0) return 7;
	fake_note(1, A, C);
	return 0;
}
static int fake_launch(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		unsigned shared, uintptr_t stream, void** params, void** extra) {
	if (fake_calls == fake_fail_at) return 1;
	fake_note(2, f, (uintptr_t)params[0]);
	return 0;
}
static int fake_graph_launch(uintptr_t exec, uintptr_t stream) {
	if (fake_calls == fake_fail_at) return 1;
	fake_note(3, exec, stream);
	return 0;
}
static uintptr_t fake_graph_launch_addr(void) { return (uintptr_t)fake_graph_launch; }
static uintptr_t fake_sgemm_addr(void) { return (uintptr_t)fake_sgemm; }
static uintptr_t fake_launch_addr(void) { return (uintptr_t)fake_launch; }
static void fake_reset(int64_t fail_at) { fake_calls = 0; fake_fail_at = fail_at; }
static int64_t fake_count(void) { return fake_calls; }
static uintptr_t fake_entry(int i, int j) { return fake_log[i][j]; }
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"
)

// MLP is a multilayer perceptron's forward pass as a C program queues it (floor.cu's
// mlp_forward): per layer an SGEMM on a cuBLAS handle bound to Stream, then, unless
// Bias is 0, a kernel launch on Stream. Addresses are raw: functions from dlsym,
// the handle, stream, kernel and device pointers as integers.
type MLP struct {
	Sgemm, Launch   uintptr // cublasSgemm_v2, cuLaunchKernel
	Handle, Stream  uintptr
	Bias            uintptr              // the CUfunction launched after each SGEMM; 0: none
	W               []uintptr            // layer i's weights: Width×Width, column-major
	H               []uintptr            // the activations: H[i] is layer i's input, Width×Batch; len(W)+1
	Args            []*[4]unsafe.Pointer // layer i's kernelParams for Bias (pinned memory)
	Width, Batch    int
	Blocks, Threads uint32
}

// Loop runs n passes from C and returns the time they took.
func (m *MLP) Loop(n int) (time.Duration, error) {
	layers := len(m.W)
	if len(m.H) != layers+1 || (m.Bias != 0 && len(m.Args) != layers) || layers == 0 {
		return 0, errors.New("callbench: MLP needs len(H) = len(W)+1 and, with Bias, len(Args) = len(W)")
	}
	// One C array of the kernelParams: the pointers in it point into memory the
	// caller pinned.
	var ap *unsafe.Pointer
	if m.Bias != 0 {
		args := make([]unsafe.Pointer, 4*layers)
		for i, a := range m.Args {
			copy(args[4*i:], a[:])
		}
		ap = &args[0]
	}
	d := C.loop_mlp(C.uintptr_t(m.Sgemm), C.uintptr_t(m.Launch), C.uintptr_t(m.Handle), C.uintptr_t(m.Stream),
		C.uintptr_t(m.Bias), (*C.uintptr_t)(unsafe.Pointer(&m.W[0])), (*C.uintptr_t)(unsafe.Pointer(&m.H[0])),
		ap, C.int(layers), C.int(m.Width), C.int(m.Batch), C.uint(m.Blocks), C.uint(m.Threads), C.int64_t(n))
	if d < 0 {
		return 0, errCall
	}
	return time.Duration(d), nil
}

// fakeMLP returns the addresses of C fakes of cublasSgemm_v2 and cuLaunchKernel
// (tests) after resetting their log; they fail at call failAt (-1: never).
func fakeMLP(failAt int) (sgemm, launch uintptr) {
	C.fake_reset(C.int64_t(failAt))
	return uintptr(C.fake_sgemm_addr()), uintptr(C.fake_launch_addr())
}

// fakeGraphLaunch returns the address of a C fake of cuGraphLaunch (tests), logged
// with the others (kind 3, the executable and the stream), after resetting the log;
// it fails at call failAt (-1: never).
func fakeGraphLaunch(failAt int) uintptr {
	C.fake_reset(C.int64_t(failAt))
	return uintptr(C.fake_graph_launch_addr())
}

// fakeMLPLog returns the fakes' calls: kind (1 SGEMM, 2 launch, 3 graph launch), then
// A and C of an SGEMM, the kernel and its first parameter of a launch, or the
// executable and stream of a graph launch.
func fakeMLPLog() [][3]uintptr {
	n := min(int(C.fake_count()), 64)
	log := make([][3]uintptr, n)
	for i := range log {
		for j := range 3 {
			log[i][j] = uintptr(C.fake_entry(C.int(i), C.int(j)))
		}
	}
	return log
}
