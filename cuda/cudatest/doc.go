// Package cudatest runs the tests of GPU code on machines without a GPU, in the
// manner of net/http/httptest: on a strict fake CUDA driver (fakecuda.c) that
// checks every driver call and counts misuse as a violation, so that a CI machine
// runs a package's GPU tests, and fails them on a driver-API bug, where a real
// driver would have crashed or silently raced.
//
// A test package of your own, whether it uses package cuda, the library packages
// of this module or the raw layers, runs on the fake with
//
//	func TestMain(m *testing.M) { os.Exit(cudatest.Main(m)) }
//
// Main leaves a machine with a driver alone (the tests run on the GPU); elsewhere it
// builds the fake with gcc, points the cuda package at it, runs the tests and fails
// the run if any of them violated the driver API. Tests then ask for a GPU with the
// gate:
//
//	func TestScale(t *testing.T) {
//		ctx, s := cudatest.Stream(t) // device 0's primary context, a new stream
//		...
//	}
//
// Stream and Require skip a test where there is no driver at all (no gcc, or
// GOCUDA_FAKECUDA=off), and fail it instead with GOCUDA_GPU_TESTS=require, which
// the GPU machine sets so that a broken driver cannot pass as a skip. The fake
// keeps real memory behind every allocation and runs copies, memsets, events, graphs
// and host functions in a pseudo-random interleaving of the streams, but it runs no
// kernel: a test that checks what kernels compute asks for Kernels, and skips on
// the fake.
//
// The rest of the package drives the fake from a test: inject out-of-memory errors
// and failing or slow destroys (InjectOOM, FailDestroy, SlowDestroy), pause its
// executor (Pause, Resume) or keep kernels running (SetKernelTime), read what it
// recorded (Launches, Counters, Violations, Check), and re-run a test in a child
// process on another build of it (Subprocess: without a driver, without some
// symbols, or posing as the CUDA 11.8 driver). The fake's own documentation, its
// modes and its environment are in this directory's README.md.
//
// This module's packages test themselves the same way; the helpers they share
// besides (RequireLibrary, NoLibrary, StatusErrors, CollectWhileBusy, the raw
// allocation and copy helpers) are here too, for wrappers of other CUDA libraries.
package cudatest
