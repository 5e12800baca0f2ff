// floor: the C floor of each gocuda workload, on the raw CUDA driver API alone (no runtime API),
// plus cuBLAS for the cublas/ and mlp/ workloads (cuBLAS runs on the runtime internally, in the
// primary context that floor makes current).
//
// Build and run on the GPU machine (tools/bench does both for you, adding an rpath to the
// toolkit's lib64 so that libcublas is found there):
//
//   nvcc -O2 -arch=sm_90 -o /tmp/floor tools/floor/floor.cu -lcuda -lcublas -lpthread
//   /tmp/floor [-ptx tools/bench/kernels.ptx] [-t 0.5] [-list] [ID|PREFIX ...]
//
// Kernels come from the same PTX file that tools/bench embeds on the Go side
// (tools/bench/kernels.ptx: empty, axpb, bias_relu (../shared/anchors/mlp.cu's kernel), and
// fill_u32, add_u32, read_sum copied from cuda/testdata/kernels.ptx, which package cuda's
// benchmarks load), loaded with
// cuModuleLoadData, so every side launches the same code. Output is one line per result,
// tab-separated, machine-readable:
//
//   info   <key>          <value>
//   floor  <workload-id>  <ns per op>  <iterations>
//   skip   <workload-id>  <reason>
//
// Each workload is one C function `double f(long n)` that runs n operations and returns the
// nanoseconds they took (the final wait for the GPU included, unless it says otherwise), registered in the table `workloads` below under the same ID as the Go side's
// registry (tools/bench/workloads.go). Timing calibrates n like Go's testing package: grow n until
// one run lasts at least -t seconds, then report that run's time divided by n.
#include <cublas_v2.h>
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define CK(x)                                                                    \
  do {                                                                           \
    CUresult r_ = (x);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char* s_ = "?";                                                      \
      cuGetErrorName(r_, &s_);                                                   \
      fprintf(stderr, "floor: %s:%d %s -> %s\n", __FILE__, __LINE__, #x, s_);    \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

#define CKB(x)                                                                   \
  do {                                                                           \
    cublasStatus_t r_ = (x);                                                     \
    if (r_ != CUBLAS_STATUS_SUCCESS) {                                           \
      fprintf(stderr, "floor: %s:%d %s -> %s\n", __FILE__, __LINE__, #x,          \
              cublasGetStatusName(r_));                                          \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

// ---- shared state, set up once in main ----
static CUdevice dev;
static CUcontext ctx;
static CUmodule mod;
static CUfunction f_empty, f_axpb;
static CUfunction f_fill, f_add, f_sum;  // fill_u32, add_u32, read_sum
static CUstream s1, s2;  // two non-blocking streams: s1 is "the" stream, s2 the hand-off partner
static CUevent ev;       // timing disabled, for hand-off
static CUmemoryPool host_pool, managed_pool;
static const char* host_pool_err;
static const char* managed_pool_err;
static CUdeviceptr xbuf;  // 4096 floats for axpb
static int xn = 4096;
static void* axpb_args[2];
static CUgraphExec graph10;

// The small-buffer workloads (handoff/buffer, tasks/sum, pipeline/*): kBufLen uint32 elements,
// one block of kThreads threads per kernel.
enum { kBufLen = 256, kThreads = 256, kPoolStreams = 8, kPoolMax = 64 };
static CUdeviceptr hbuf;        // handoff/buffer's buffer: kBufLen uint32
static uint32_t* hx;            // pinned host: x[i] = i, i < kBufLen (tasks/sum's input)
static unsigned long long* hres;  // pinned host: one sum copied back (tasks/sum, pipeline/*)
static CUdeviceptr dsum;        // pipeline/*'s device sum (a uint64, the consumer's, reused)
// Kernel arguments that never change: read_sum's spin_ns is 0, every kernel covers kBufLen.
static uint32_t arg_one = 1;
static uint64_t arg_len = kBufLen, arg_spin0 = 0;
static void* handoff_args[3];   // add_u32(hbuf, 1, kBufLen)

// The MLP workloads (cublas/sgemm-small, mlp/*): ../shared/anchors/mlp.cu's network, 4 layers of
// 256x256 weights, batch 16, column-major as cuBLAS takes it; all memory zeroed, as there.
enum { kLayers = 4, kWidth = 256, kBatch = 16, kBlasWorkspace = 4 << 20 };
static const long kMLPChunk = 2000;  // mlp.cu's iterations per measurement
static CUfunction f_bias_relu;
static cublasHandle_t blas;   // bound to s1, with a kBlasWorkspace workspace (as mlp.cu)
static const char* blas_err;  // why there is no handle: the cuBLAS workloads are skipped
static CUdeviceptr mlp_w[kLayers], mlp_b[kLayers];  // weights kWidth x kWidth, biases kWidth
static CUdeviceptr mlp_h[kLayers + 1];              // activations kWidth x kBatch
static CUdeviceptr blas_ws;
static int arg_rows = kWidth, arg_cols = kBatch;
static void* bias_args[kLayers][4];  // bias_relu(h[i+1], b[i], kWidth, kBatch)
static const float f_one = 1, f_zero = 0;

enum { KiB4 = 4096, MiB64 = 64 << 20 };
static const int kGraphKernels = 10;
static const long kLaunchChunk = 20000;

// ---- workloads: each runs n operations and returns the nanoseconds they took ----
// The timed span includes the final wait for the GPU, except where a workload says otherwise.

static double alloc_device(long n, size_t sz) {
  double t0 = now_ns();
  CUdeviceptr d;
  for (long i = 0; i < n; i++) {
    CK(cuMemAlloc(&d, sz));
    CK(cuMemsetD8Async(d, 1, sz, s1));
    CK(cuMemFree(d));
  }
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

static double alloc_device_pool(long n, size_t sz) {
  double t0 = now_ns();
  CUdeviceptr d;
  for (long i = 0; i < n; i++) {
    CK(cuMemAllocAsync(&d, sz, s1));
    CK(cuMemsetD8Async(d, 1, sz, s1));
    CK(cuMemFreeAsync(d, s1));
  }
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

static double alloc_pinned(long n, size_t sz) {
  double t0 = now_ns();
  void* h;
  for (long i = 0; i < n; i++) {
    CK(cuMemHostAlloc(&h, sz, 0));
    memset(h, 0, sz);
    CK(cuMemFreeHost(h));
  }
  return now_ns() - t0;
}

static double alloc_pool_host(long n, size_t sz, CUmemoryPool pool) {
  double t0 = now_ns();
  CUdeviceptr d;
  for (long i = 0; i < n; i++) {
    CK(cuMemAllocFromPoolAsync(&d, sz, pool, s1));
    CK(cuStreamSynchronize(s1));
    memset((void*)d, 0, sz);
    CK(cuMemFreeAsync(d, s1));
  }
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

static double alloc_unified(long n, size_t sz) {
  double t0 = now_ns();
  CUdeviceptr d;
  for (long i = 0; i < n; i++) {
    CK(cuMemAllocManaged(&d, sz, CU_MEM_ATTACH_GLOBAL));
    memset((void*)d, 0, sz);
    CK(cuMemFree(d));
  }
  return now_ns() - t0;
}

static double w_alloc_device_4k(long n) { return alloc_device(n, KiB4); }
static double w_alloc_device_64m(long n) { return alloc_device(n, MiB64); }
static double w_alloc_device_pool_4k(long n) { return alloc_device_pool(n, KiB4); }
static double w_alloc_device_pool_64m(long n) { return alloc_device_pool(n, MiB64); }
static double w_alloc_pinned_4k(long n) { return alloc_pinned(n, KiB4); }
static double w_alloc_pinned_64m(long n) { return alloc_pinned(n, MiB64); }
static double w_alloc_pinned_pool_4k(long n) { return alloc_pool_host(n, KiB4, host_pool); }
static double w_alloc_pinned_pool_64m(long n) { return alloc_pool_host(n, MiB64, host_pool); }
static double w_alloc_unified_4k(long n) { return alloc_unified(n, KiB4); }
static double w_alloc_unified_64m(long n) { return alloc_unified(n, MiB64); }
static double w_alloc_unified_pool_4k(long n) { return alloc_pool_host(n, KiB4, managed_pool); }
static double w_alloc_unified_pool_64m(long n) { return alloc_pool_host(n, MiB64, managed_pool); }

// launch_chunked times submission only: cuLaunchKernel returning. Every kLaunchChunk launches
// the stream is synchronized off the clock (as the anchor and the package benchmark do), so the
// queue never fills.
static double launch_chunked(long n, CUfunction f, unsigned grid, unsigned block, void** args) {
  double total = 0;
  for (long done = 0; done < n; done += kLaunchChunk) {
    long m = n - done < kLaunchChunk ? n - done : kLaunchChunk;
    double t0 = now_ns();
    for (long i = 0; i < m; i++) CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s1, args, NULL));
    total += now_ns() - t0;
    CK(cuStreamSynchronize(s1));
  }
  return total;
}

static double w_launch_empty(long n) { return launch_chunked(n, f_empty, 1, 1, NULL); }
static double w_launch_args(long n) { return launch_chunked(n, f_axpb, 16, 256, axpb_args); }

static double w_call_ctx_get_current(long n) {
  double t0 = now_ns();
  CUcontext c;
  for (long i = 0; i < n; i++) CK(cuCtxGetCurrent(&c));
  return now_ns() - t0;
}

static double w_call_device_get_attribute(long n) {
  double t0 = now_ns();
  int v;
  for (long i = 0; i < n; i++) CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  return now_ns() - t0;
}

static double w_handoff_event(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUstream a = (i & 1) ? s2 : s1, b = (i & 1) ? s1 : s2;
    CK(cuEventRecord(ev, a));
    CK(cuStreamWaitEvent(b, ev, 0));
    CK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL));
  }
  CK(cuStreamSynchronize(s1));
  CK(cuStreamSynchronize(s2));
  return now_ns() - t0;
}

static double w_handoff_host_sync(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUstream b = (i & 1) ? s1 : s2;
    CK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, b, NULL, NULL));
    CK(cuStreamSynchronize(b));
  }
  return now_ns() - t0;
}

// handoff/buffer: one buffer written alternately on s1 and s2, each use ordered on the GPU after
// the previous one on the other stream: per operation cuEventRecord(ev, previous stream) +
// cuStreamWaitEvent(next stream, ev) + add_u32<<<1, 256>>>(hbuf, 1, 256) on the next stream.
// The buffer is zeroed before the clock starts and checked after it stops: every element must
// have been incremented n times (a hand-off that did not order the kernels could lose updates).
static double w_handoff_buffer(long n) {
  CK(cuMemsetD32Async(hbuf, 0, kBufLen, s1));
  CK(cuStreamSynchronize(s1));
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUstream a = (i & 1) ? s2 : s1, b = (i & 1) ? s1 : s2;
    CK(cuEventRecord(ev, a));
    CK(cuStreamWaitEvent(b, ev, 0));
    CK(cuLaunchKernel(f_add, 1, 1, 1, kThreads, 1, 1, 0, b, handoff_args, NULL));
  }
  CK(cuStreamSynchronize(s1));
  CK(cuStreamSynchronize(s2));
  double dt = now_ns() - t0;
  static uint32_t got[kBufLen];
  CK(cuMemcpyDtoH(got, hbuf, sizeof got));
  for (int k = 0; k < kBufLen; k++) {
    if (got[k] != (uint32_t)n) {
      fprintf(stderr, "floor: handoff/buffer: element %d is %u after %ld increments\n", k, got[k], n);
      exit(1);
    }
  }
  return dt;
}

// ---- stream pool: a mutex-protected LIFO free list of non-blocking streams that hands out
// only streams whose work is complete (cuStreamQuery under the lock). ----
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static CUstream pool_free[kPoolMax];  // pool_free[pool_n-1] is the most recently released
static int pool_n;

// pool_acquire takes the most recently released stream whose work is done, or creates a
// stream when none is. With idle streams it is lock, pop, cuStreamQuery, unlock.
static CUstream pool_acquire(void) {
  CUstream s = NULL;
  pthread_mutex_lock(&pool_mu);
  for (int i = pool_n - 1; i >= 0; i--) {
    CUresult r = cuStreamQuery(pool_free[i]);
    if (r == CUDA_ERROR_NOT_READY) continue;  // still busy: stays in the list
    CK(r);
    s = pool_free[i];
    memmove(&pool_free[i], &pool_free[i + 1], (size_t)(pool_n - 1 - i) * sizeof pool_free[0]);
    pool_n--;
    break;
  }
  pthread_mutex_unlock(&pool_mu);
  if (s == NULL) CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

// pool_release puts s back on top of the list (lock, push, unlock); a full pool destroys it.
static void pool_release(CUstream s) {
  pthread_mutex_lock(&pool_mu);
  if (pool_n < kPoolMax) {
    pool_free[pool_n++] = s;
    s = NULL;
  }
  pthread_mutex_unlock(&pool_mu);
  if (s != NULL) CK(cuStreamDestroy(s));
}

// stream/pool: one acquire + one release of an idle pooled stream.
static double w_stream_pool(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) pool_release(pool_acquire());
  return now_ns() - t0;
}

// tasks/sum: one task of "sum(x + 1) for a 256-element x", on s1, one after another. Per
// operation: cuMemAllocAsync 1032 bytes (x: 256 uint32, then the uint64 sum at byte 1024),
// cuMemcpyHtoDAsync x from pinned host memory (x[i] = i), cuMemsetD32Async the sum to 0,
// add_u32<<<1, 256>>>(x, 1, 256), read_sum<<<1, 256>>>(x, 256, 0, sum), cuMemcpyDtoHAsync the
// sum into pinned host memory, cuStreamSynchronize, cuMemFreeAsync. The last sum is checked
// after the clock stops (256 * 257 / 2).
static double w_tasks_sum(long n) {
  const unsigned long long want = (unsigned long long)kBufLen * (kBufLen + 1) / 2;
  *hres = 0;
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUdeviceptr x, sum;
    CK(cuMemAllocAsync(&x, kBufLen * sizeof(uint32_t) + sizeof(uint64_t), s1));
    sum = x + kBufLen * sizeof(uint32_t);
    CK(cuMemcpyHtoDAsync(x, hx, kBufLen * sizeof(uint32_t), s1));
    CK(cuMemsetD32Async(sum, 0, 2, s1));
    void* add_args[] = {&x, &arg_one, &arg_len};
    CK(cuLaunchKernel(f_add, 1, 1, 1, kThreads, 1, 1, 0, s1, add_args, NULL));
    void* sum_args[] = {&x, &arg_len, &arg_spin0, &sum};
    CK(cuLaunchKernel(f_sum, 1, 1, 1, kThreads, 1, 1, 0, s1, sum_args, NULL));
    CK(cuMemcpyDtoHAsync(hres, sum, sizeof *hres, s1));
    CK(cuStreamSynchronize(s1));
    CK(cuMemFreeAsync(x, s1));
  }
  double dt = now_ns() - t0;
  if (*hres != want) {
    fprintf(stderr, "floor: tasks/sum: sum is %llu, want %llu\n", *hres, want);
    exit(1);
  }
  return dt;
}

// pipeline/consumer: a producer and a consumer in one thread, one item per operation.
// Produce on s1: cuMemAllocAsync 1 KiB (256 uint32), fill_u32<<<1, 256>>>(p, 1, 256),
// cuEventRecord(ev, s1). Consume on s2: cuStreamWaitEvent(s2, ev), cuMemsetD32Async the
// consumer's device uint64 (allocated once) to 0, read_sum<<<1, 256>>>(p, 256, 0, sum),
// cuMemcpyDtoHAsync the sum into pinned host memory, cuStreamSynchronize(s2), and
// cuMemFreeAsync(p, s2) (on the stream that used it last). The last sum is checked (256).
// pipeline_run runs n pipeline items: each allocated (ring == 0) or taken in turn
// from a ring of ring buffers allocated beforehand, which needs no event back from
// s2 since s2 is synchronized after every item.
static double pipeline_run(long n, int ring) {
  const unsigned long long want = kBufLen;
  CUdeviceptr bufs[8];
  for (int j = 0; j < ring; j++) CK(cuMemAllocAsync(&bufs[j], kBufLen * sizeof(uint32_t), s1));
  CK(cuStreamSynchronize(s1));
  *hres = 0;
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    CUdeviceptr p;
    if (ring)
      p = bufs[i % ring];
    else
      CK(cuMemAllocAsync(&p, kBufLen * sizeof(uint32_t), s1));
    void* fill_args[] = {&p, &arg_one, &arg_len};
    CK(cuLaunchKernel(f_fill, 1, 1, 1, kThreads, 1, 1, 0, s1, fill_args, NULL));
    CK(cuEventRecord(ev, s1));

    CK(cuStreamWaitEvent(s2, ev, 0));
    CK(cuMemsetD32Async(dsum, 0, 2, s2));
    void* sum_args[] = {&p, &arg_len, &arg_spin0, &dsum};
    CK(cuLaunchKernel(f_sum, 1, 1, 1, kThreads, 1, 1, 0, s2, sum_args, NULL));
    CK(cuMemcpyDtoHAsync(hres, dsum, sizeof *hres, s2));
    CK(cuStreamSynchronize(s2));
    if (!ring) CK(cuMemFreeAsync(p, s2));
  }
  double dt = now_ns() - t0;
  for (int j = 0; j < ring; j++) CK(cuMemFreeAsync(bufs[j], s1));
  CK(cuStreamSynchronize(s1));
  if (*hres != want) {
    fprintf(stderr, "floor: pipeline: sum is %llu, want %llu\n", *hres, want);
    exit(1);
  }
  return dt;
}

static double w_pipeline(long n) { return pipeline_run(n, 0); }
static double w_pipeline_ring(long n) { return pipeline_run(n, 8); }

static double w_stream_create_destroy(long n) {
  double t0 = now_ns();
  CUstream s;
  for (long i = 0; i < n; i++) {
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamDestroy(s));
  }
  return now_ns() - t0;
}

static double w_graph_eager10(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++)
    for (int j = 0; j < kGraphKernels; j++)
      CK(cuLaunchKernel(f_axpb, 16, 1, 1, 256, 1, 1, 0, s1, axpb_args, NULL));
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

static double w_graph_graph10(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) CK(cuGraphLaunch(graph10, s1));
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

// The submit and latency forms of a workload's iteration (one operation = one iteration):
// submit times only the CPU's enqueueing, in chunks of kSubmitChunk iterations short enough
// that the GPU's queue never fills, each chunk followed by cuStreamSynchronize off the clock;
// latency times one iteration plus cuStreamSynchronize, the time until its result is there.
static const long kSubmitChunk = 32;
static double submit_time(long n, void (*iter)(void)) {
  double t = 0;
  for (long done = 0; done < n; done += kSubmitChunk) {
    long m = n - done < kSubmitChunk ? n - done : kSubmitChunk;
    double t0 = now_ns();
    for (long k = 0; k < m; k++) iter();
    t += now_ns() - t0;
    CK(cuStreamSynchronize(s1));
  }
  return t;
}
static double latency_time(long n, void (*iter)(void)) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    iter();
    CK(cuStreamSynchronize(s1));
  }
  return now_ns() - t0;
}

static void eager10_iter(void) {
  for (int j = 0; j < kGraphKernels; j++) CK(cuLaunchKernel(f_axpb, 16, 1, 1, 256, 1, 1, 0, s1, axpb_args, NULL));
}
static void graph10_iter(void) { CK(cuGraphLaunch(graph10, s1)); }
static double w_graph_eager10_submit(long n) { return submit_time(n, eager10_iter); }
static double w_graph_eager10_latency(long n) { return latency_time(n, eager10_iter); }
static double w_graph_graph10_submit(long n) { return submit_time(n, graph10_iter); }
static double w_graph_graph10_latency(long n) { return latency_time(n, graph10_iter); }

// gemm_layer queues layer i's SGEMM on s1 (through the handle's stream): h[i+1] = W[i] h[i],
// mlp.cu's cublasSgemm(N, N, 256, 16, 256, 1, W[i], 256, h[i], 256, 0, h[i+1], 256).
static void gemm_layer(int i) {
  CKB(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, kWidth, kBatch, kWidth, &f_one, (const float*)mlp_w[i], kWidth,
                  (const float*)mlp_h[i], kWidth, &f_zero, (float*)mlp_h[i + 1], kWidth));
}

// mlp_forward queues one forward pass on s1: per layer the SGEMM, then
// bias_relu<<<(256*16+255)/256, 256>>>(h[i+1], b[i], 256, 16).
static void mlp_forward(void) {
  for (int i = 0; i < kLayers; i++) {
    gemm_layer(i);
    CK(cuLaunchKernel(f_bias_relu, (kWidth * kBatch + 255) / 256, 1, 1, 256, 1, 1, 0, s1, bias_args[i], NULL));
  }
}

// cublas/sgemm-small: one cublasSgemm_v2 of the MLP's shape (N, N, m=256, n=16, k=256: W[0], 256x256,
// times h[0], 256x16, into h[1]) on s1. Timed: n calls, then the final cuStreamSynchronize (as
// graph/eager10), so per call it is the submit cost while the CPU is the slower side (mlp.cu's
// eager submit and per-iteration times are equal), else the GPU's time per GEMM.
static double w_cublas_sgemm_small(long n) {
  double t0 = now_ns();
  for (long i = 0; i < n; i++) gemm_layer(0);
  CK(cuStreamSynchronize(s1));
  return now_ns() - t0;
}

// mlp/graph: one operation is one replay of the forward pass, captured once on s1 (off the
// clock: capture, instantiate, 20 warm-up replays), timed as mlp/eager.
static CUgraphExec mlp_exec;
static void mlp_capture(void) {
  if (!mlp_exec) {
    CUgraph g;
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    mlp_forward();
    CK(cuStreamEndCapture(s1, &g));
    CK(cuGraphInstantiateWithFlags(&mlp_exec, g, 0));
    CK(cuGraphDestroy(g));
    for (int i = 0; i < 20; i++) CK(cuGraphLaunch(mlp_exec, s1));
    CK(cuStreamSynchronize(s1));
  }
}
static void mlp_graph_iter(void) { CK(cuGraphLaunch(mlp_exec, s1)); }
// mlp/graph-submit and mlp/graph-latency: one replay, timed as submit_time and latency_time.
static double w_mlp_graph_submit(long n) {
  mlp_capture();
  return submit_time(n, mlp_graph_iter);
}
static double w_mlp_graph_latency(long n) {
  mlp_capture();
  return latency_time(n, mlp_graph_iter);
}
static double w_mlp_graph(long n) {
  mlp_capture();
  double t0 = now_ns();
  for (long done = 0; done < n; done += kMLPChunk) {
    long m = n - done < kMLPChunk ? n - done : kMLPChunk;
    for (long k = 0; k < m; k++) CK(cuGraphLaunch(mlp_exec, s1));
    CK(cuStreamSynchronize(s1));
  }
  return now_ns() - t0;
}

// mlp/eager: one operation is one eager forward pass of mlp.cu's MLP on s1 (4 x (SGEMM +
// bias_relu)). Timed as mlp.cu's "per-iter": passes submitted in chunks of kMLPChunk (mlp.cu's
// 2000), each chunk followed by cuStreamSynchronize, everything on the clock.
static double w_mlp_eager(long n) {
  double t0 = now_ns();
  for (long done = 0; done < n; done += kMLPChunk) {
    long m = n - done < kMLPChunk ? n - done : kMLPChunk;
    for (long k = 0; k < m; k++) mlp_forward();
    CK(cuStreamSynchronize(s1));
  }
  return now_ns() - t0;
}

// ---- copy/<dir>/<kind>/<size>: synchronous host <-> device copies (../shared/anchors/copybw.cu's,
// per size). One operation is one cuMemcpyHtoD or cuMemcpyDtoH of the size (the legacy stream,
// synchronous), between a device buffer and host memory of the kind:
//   warm    malloc'd memory, written once before the clock starts;
//   fresh   fresh anonymous memory per copy (mmap, off the clock, as munmap): its first touch
//           happens inside the copy (for h2d: reads of never-written pages);
//   pinned  cuMemHostAlloc'd memory, written once.
// The buffers are made once for the largest size asked (up to 1 GiB of each) and kept. ----
enum { kCopyWarm, kCopyFresh, kCopyPinned };
static CUdeviceptr copy_dev;
static char* copy_warm;
static void* copy_pinned;
static size_t copy_cap;

static void copy_buffers(size_t sz) {
  if (sz <= copy_cap) return;
  if (copy_cap) {
    CK(cuMemFree(copy_dev));
    free(copy_warm);
    CK(cuMemFreeHost(copy_pinned));
  }
  CK(cuMemAlloc(&copy_dev, sz));
  CK(cuMemsetD8(copy_dev, 1, sz));
  copy_warm = (char*)malloc(sz);
  if (!copy_warm) {
    fprintf(stderr, "floor: malloc(%zu) failed\n", sz);
    exit(1);
  }
  memset(copy_warm, 2, sz);
  CK(cuMemHostAlloc(&copy_pinned, sz, 0));
  memset(copy_pinned, 3, sz);
  CK(cuCtxSynchronize());
  copy_cap = sz;
}

static void copy_one(void* h, size_t sz, int h2d) {
  if (h2d)
    CK(cuMemcpyHtoD(copy_dev, h, sz));
  else
    CK(cuMemcpyDtoH(h, copy_dev, sz));
}

static double copy_run(long n, size_t sz, int h2d, int kind) {
  copy_buffers(sz);
  if (kind == kCopyFresh) {
    double total = 0;
    for (long i = 0; i < n; i++) {
      void* h = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (h == MAP_FAILED) {
        fprintf(stderr, "floor: mmap(%zu) failed\n", sz);
        exit(1);
      }
      double t0 = now_ns();
      copy_one(h, sz, h2d);
      total += now_ns() - t0;
      munmap(h, sz);
    }
    return total;
  }
  void* h = kind == kCopyPinned ? copy_pinned : (void*)copy_warm;
  double t0 = now_ns();
  for (long i = 0; i < n; i++) copy_one(h, sz, h2d);
  return now_ns() - t0;
}

static double w_copy_h2d_warm_4k(long n) { return copy_run(n, (size_t)(4u << 10), 1, kCopyWarm); }
static double w_copy_h2d_warm_1m(long n) { return copy_run(n, (size_t)(1u << 20), 1, kCopyWarm); }
static double w_copy_h2d_warm_64m(long n) { return copy_run(n, (size_t)(64u << 20), 1, kCopyWarm); }
static double w_copy_h2d_warm_1g(long n) { return copy_run(n, (size_t)(1u << 30), 1, kCopyWarm); }
static double w_copy_h2d_fresh_4k(long n) { return copy_run(n, (size_t)(4u << 10), 1, kCopyFresh); }
static double w_copy_h2d_fresh_1m(long n) { return copy_run(n, (size_t)(1u << 20), 1, kCopyFresh); }
static double w_copy_h2d_fresh_64m(long n) { return copy_run(n, (size_t)(64u << 20), 1, kCopyFresh); }
static double w_copy_h2d_fresh_1g(long n) { return copy_run(n, (size_t)(1u << 30), 1, kCopyFresh); }
static double w_copy_h2d_pinned_4k(long n) { return copy_run(n, (size_t)(4u << 10), 1, kCopyPinned); }
static double w_copy_h2d_pinned_1m(long n) { return copy_run(n, (size_t)(1u << 20), 1, kCopyPinned); }
static double w_copy_h2d_pinned_64m(long n) { return copy_run(n, (size_t)(64u << 20), 1, kCopyPinned); }
static double w_copy_h2d_pinned_1g(long n) { return copy_run(n, (size_t)(1u << 30), 1, kCopyPinned); }
static double w_copy_d2h_warm_4k(long n) { return copy_run(n, (size_t)(4u << 10), 0, kCopyWarm); }
static double w_copy_d2h_warm_1m(long n) { return copy_run(n, (size_t)(1u << 20), 0, kCopyWarm); }
static double w_copy_d2h_warm_64m(long n) { return copy_run(n, (size_t)(64u << 20), 0, kCopyWarm); }
static double w_copy_d2h_warm_1g(long n) { return copy_run(n, (size_t)(1u << 30), 0, kCopyWarm); }
static double w_copy_d2h_fresh_4k(long n) { return copy_run(n, (size_t)(4u << 10), 0, kCopyFresh); }
static double w_copy_d2h_fresh_1m(long n) { return copy_run(n, (size_t)(1u << 20), 0, kCopyFresh); }
static double w_copy_d2h_fresh_64m(long n) { return copy_run(n, (size_t)(64u << 20), 0, kCopyFresh); }
static double w_copy_d2h_fresh_1g(long n) { return copy_run(n, (size_t)(1u << 30), 0, kCopyFresh); }
static double w_copy_d2h_pinned_4k(long n) { return copy_run(n, (size_t)(4u << 10), 0, kCopyPinned); }
static double w_copy_d2h_pinned_1m(long n) { return copy_run(n, (size_t)(1u << 20), 0, kCopyPinned); }
static double w_copy_d2h_pinned_64m(long n) { return copy_run(n, (size_t)(64u << 20), 0, kCopyPinned); }
static double w_copy_d2h_pinned_1g(long n) { return copy_run(n, (size_t)(1u << 30), 0, kCopyPinned); }

// ---- readiness checks: NULL when the workload can run, else why not ----
static const char* need_host_pool(void) { return host_pool_err; }
static const char* need_managed_pool(void) { return managed_pool_err; }
static const char* need_cublas(void) { return blas_err; }

// ---- the registry: IDs match tools/bench/workloads.go ----
struct workload {
  const char* id;
  double (*run)(long n);  // runs n operations, returns the nanoseconds they took
  const char* (*ready)(void);  // may be NULL
};

static const struct workload workloads[] = {
    {"alloc/device/4KiB", w_alloc_device_4k, NULL},
    {"alloc/device/64MiB", w_alloc_device_64m, NULL},
    {"alloc/device-pool/4KiB", w_alloc_device_pool_4k, NULL},
    {"alloc/device-pool/64MiB", w_alloc_device_pool_64m, NULL},
    {"alloc/pinned/4KiB", w_alloc_pinned_4k, NULL},
    {"alloc/pinned/64MiB", w_alloc_pinned_64m, NULL},
    {"alloc/pinned-pool/4KiB", w_alloc_pinned_pool_4k, need_host_pool},
    {"alloc/pinned-pool/64MiB", w_alloc_pinned_pool_64m, need_host_pool},
    {"alloc/unified/4KiB", w_alloc_unified_4k, NULL},
    {"alloc/unified/64MiB", w_alloc_unified_64m, NULL},
    {"alloc/unified-pool/4KiB", w_alloc_unified_pool_4k, need_managed_pool},
    {"alloc/unified-pool/64MiB", w_alloc_unified_pool_64m, need_managed_pool},
    {"launch/empty", w_launch_empty, NULL},
    {"launch/empty-batch8", w_launch_empty, NULL},
    {"launch/args", w_launch_args, NULL},
    {"call/CtxGetCurrent", w_call_ctx_get_current, NULL},
    {"call/DeviceGetAttribute", w_call_device_get_attribute, NULL},
    {"handoff/event", w_handoff_event, NULL},
    {"handoff/host-sync", w_handoff_host_sync, NULL},
    {"handoff/buffer", w_handoff_buffer, NULL},
    {"stream/create-destroy", w_stream_create_destroy, NULL},
    {"stream/pool", w_stream_pool, NULL},
    {"tasks/sum", w_tasks_sum, NULL},
    {"tasks/sum-one", w_tasks_sum, NULL},
    {"pipeline/consumer", w_pipeline, NULL},
    {"pipeline/one", w_pipeline, NULL},
    {"pipeline/alloc-per-item", w_pipeline, NULL},
    {"pipeline/four-consumers", w_pipeline, NULL},
    {"pipeline/ring", w_pipeline_ring, NULL},
    {"tasks/goroutines-20000", w_tasks_sum, NULL},
    {"graph/eager10", w_graph_eager10, NULL},
    {"graph/graph10", w_graph_graph10, NULL},
    {"graph/eager10-submit", w_graph_eager10_submit, NULL},
    {"graph/eager10-latency", w_graph_eager10_latency, NULL},
    {"graph/graph10-submit", w_graph_graph10_submit, NULL},
    {"graph/graph10-latency", w_graph_graph10_latency, NULL},
    {"cublas/sgemm-small", w_cublas_sgemm_small, need_cublas},
    {"mlp/eager", w_mlp_eager, need_cublas},
    // mlp/fused's C side is the unfused eager pass: the row shows the fused Go pass beside it.
    {"mlp/fused", w_mlp_eager, need_cublas},
    {"mlp/graph", w_mlp_graph, need_cublas},
    {"mlp/graph-submit", w_mlp_graph_submit, need_cublas},
    {"mlp/graph-latency", w_mlp_graph_latency, need_cublas},
    {"copy/h2d/pageable-warm/4KiB", w_copy_h2d_warm_4k, NULL},
    {"copy/h2d/pageable-warm/1MiB", w_copy_h2d_warm_1m, NULL},
    {"copy/h2d/pageable-warm/64MiB", w_copy_h2d_warm_64m, NULL},
    {"copy/h2d/pageable-warm/1GiB", w_copy_h2d_warm_1g, NULL},
    {"copy/h2d/pageable-fresh/4KiB", w_copy_h2d_fresh_4k, NULL},
    {"copy/h2d/pageable-fresh/1MiB", w_copy_h2d_fresh_1m, NULL},
    {"copy/h2d/pageable-fresh/64MiB", w_copy_h2d_fresh_64m, NULL},
    {"copy/h2d/pageable-fresh/1GiB", w_copy_h2d_fresh_1g, NULL},
    {"copy/h2d/pinned/4KiB", w_copy_h2d_pinned_4k, NULL},
    {"copy/h2d/pinned/1MiB", w_copy_h2d_pinned_1m, NULL},
    {"copy/h2d/pinned/64MiB", w_copy_h2d_pinned_64m, NULL},
    {"copy/h2d/pinned/1GiB", w_copy_h2d_pinned_1g, NULL},
    {"copy/d2h/pageable-warm/4KiB", w_copy_d2h_warm_4k, NULL},
    {"copy/d2h/pageable-warm/1MiB", w_copy_d2h_warm_1m, NULL},
    {"copy/d2h/pageable-warm/64MiB", w_copy_d2h_warm_64m, NULL},
    {"copy/d2h/pageable-warm/1GiB", w_copy_d2h_warm_1g, NULL},
    {"copy/d2h/pageable-fresh/4KiB", w_copy_d2h_fresh_4k, NULL},
    {"copy/d2h/pageable-fresh/1MiB", w_copy_d2h_fresh_1m, NULL},
    {"copy/d2h/pageable-fresh/64MiB", w_copy_d2h_fresh_64m, NULL},
    {"copy/d2h/pageable-fresh/1GiB", w_copy_d2h_fresh_1g, NULL},
    {"copy/d2h/pinned/4KiB", w_copy_d2h_pinned_4k, NULL},
    {"copy/d2h/pinned/1MiB", w_copy_d2h_pinned_1m, NULL},
    {"copy/d2h/pinned/64MiB", w_copy_d2h_pinned_64m, NULL},
    {"copy/d2h/pinned/1GiB", w_copy_d2h_pinned_1g, NULL},
};
static const int nworkloads = (int)(sizeof workloads / sizeof workloads[0]);

// ---- setup ----

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "floor: cannot open %s (give the PTX with -ptx)\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = (char*)malloc((size_t)len + 1);
  if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
    fprintf(stderr, "floor: short read of %s\n", path);
    exit(2);
  }
  buf[len] = 0;
  fclose(f);
  return buf;
}

static const char* make_pool(CUmemoryPool* pool, CUmemAllocationType type, CUmemLocationType loc) {
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = type;
  pp.location.type = loc;
  pp.location.id = 0;
  CUresult r = cuMemPoolCreate(pool, &pp);
  if (r != CUDA_SUCCESS) {
    const char* s = "?";
    cuGetErrorName(r, &s);
    return s;
  }
  cuuint64_t thr = ~0ULL;
  CK(cuMemPoolSetAttribute(*pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  return NULL;
}

// setup_mlp allocates the MLP's memory (zeroed) and makes the cuBLAS handle; a failed
// cublasCreate skips the cuBLAS workloads rather than all of them. 20 forward passes warm up
// (cuBLAS loads its kernels at first use), as in mlp.cu.
static void setup_mlp(void) {
  for (int i = 0; i < kLayers; i++) {
    CK(cuMemAlloc(&mlp_w[i], (size_t)kWidth * kWidth * sizeof(float)));
    CK(cuMemsetD8(mlp_w[i], 0, (size_t)kWidth * kWidth * sizeof(float)));
    CK(cuMemAlloc(&mlp_b[i], kWidth * sizeof(float)));
    CK(cuMemsetD8(mlp_b[i], 0, kWidth * sizeof(float)));
  }
  for (int i = 0; i <= kLayers; i++) {
    CK(cuMemAlloc(&mlp_h[i], (size_t)kWidth * kBatch * sizeof(float)));
    CK(cuMemsetD8(mlp_h[i], 0, (size_t)kWidth * kBatch * sizeof(float)));
  }
  for (int i = 0; i < kLayers; i++) {
    bias_args[i][0] = &mlp_h[i + 1];
    bias_args[i][1] = &mlp_b[i];
    bias_args[i][2] = &arg_rows;
    bias_args[i][3] = &arg_cols;
  }
  cublasStatus_t st = cublasCreate(&blas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    blas_err = cublasGetStatusName(st);
    return;
  }
  CK(cuMemAlloc(&blas_ws, kBlasWorkspace));
  CKB(cublasSetStream(blas, s1));
  CKB(cublasSetWorkspace(blas, (void*)blas_ws, kBlasWorkspace));
  for (int k = 0; k < 20; k++) mlp_forward();
  CK(cuStreamSynchronize(s1));
}

// print_pcie prints device 0's PCIe link (Linux sysfs, from cuDeviceGetPCIBusId) and its
// limit per direction: lanes x GT/s x the line code (8b/10b to 5 GT/s, 128b/130b to 32, then
// FLIT's 242/256) / 8; tools/bench's PCIeLink prints the same.
static int read_num(const char* dir, const char* name, double* v) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  int ok = fscanf(f, "%lf", v) == 1;
  fclose(f);
  return ok;
}

static double link_gbps(double gts, double width) {
  double eff = gts <= 5 ? 0.8 : gts > 32 ? 242.0 / 256 : 128.0 / 130;
  return gts * width * eff / 8;
}

static int pcie_gen(double gts) {
  const double r[] = {2.5, 5, 8, 16, 32, 64, 128};
  for (int g = 0; g < 7; g++)
    if (gts <= r[g] + 0.01) return g + 1;
  return 0;
}

static void print_pcie(void) {
  char id[64], dir[256];
  CK(cuDeviceGetPCIBusId(id, sizeof id, dev));
  for (char* p = id; *p; p++)
    if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
  snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s", id);
  double s, w, ms, mw;
  if (!read_num(dir, "current_link_speed", &s) || !read_num(dir, "current_link_width", &w)) {
    printf("info\tpcie\tPCIe %s: link unknown (no %s/current_link_speed)\n", id, dir);
    return;
  }
  printf("info\tpcie\tPCIe %s: Gen%d x%d (%g GT/s): limit %.1f GB/s per direction", id, pcie_gen(s), (int)w, s,
         link_gbps(s, w));
  if (read_num(dir, "max_link_speed", &ms) && read_num(dir, "max_link_width", &mw) && (ms != s || mw != w))
    printf("; max Gen%d x%d: %.1f GB/s", pcie_gen(ms), (int)mw, link_gbps(ms, mw));
  printf("\n");
}

// blocking_sync: give the primary context CU_CTX_SCHED_BLOCKING_SYNC, as gocuda's cuda
// package does (-blocking-sync; the floor's default is the driver's, as a C program's).
static int blocking_sync;

static void setup(const char* ptx_path) {
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  if (blocking_sync) CK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  char name[256];
  CK(cuDeviceGetName(name, sizeof name, dev));
  int drv = 0;
  CK(cuDriverGetVersion(&drv));
  printf("info\tdevice\t%s\n", name);
  if (blocking_sync) printf("info\tsched\tCU_CTX_SCHED_BLOCKING_SYNC\n");
  printf("info\tdriver\t%d.%d\n", drv / 1000, drv % 1000 / 10);
  print_pcie();

  char* ptx = read_file(ptx_path);
  CK(cuModuleLoadData(&mod, ptx));
  free(ptx);
  CK(cuModuleGetFunction(&f_empty, mod, "empty"));
  CK(cuModuleGetFunction(&f_axpb, mod, "axpb"));
  CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
  CK(cuModuleGetFunction(&f_add, mod, "add_u32"));
  CK(cuModuleGetFunction(&f_sum, mod, "read_sum"));
  CK(cuModuleGetFunction(&f_bias_relu, mod, "bias_relu"));
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

  // The device's default pool keeps what it frees (as a long-running program would set it).
  CUmemoryPool defpool;
  CK(cuDeviceGetDefaultMemPool(&defpool, dev));
  cuuint64_t thr = ~0ULL;
  CK(cuMemPoolSetAttribute(defpool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  host_pool_err = make_pool(&host_pool, CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_LOCATION_TYPE_HOST);
  managed_pool_err = make_pool(&managed_pool, CU_MEM_ALLOCATION_TYPE_MANAGED, CU_MEM_LOCATION_TYPE_DEVICE);

  CK(cuMemAlloc(&xbuf, (size_t)xn * sizeof(float)));
  CK(cuMemsetD8(xbuf, 0, (size_t)xn * sizeof(float)));
  axpb_args[0] = &xbuf;
  axpb_args[1] = &xn;

  // The small-buffer workloads' memory and the stream pool's streams.
  CK(cuMemAlloc(&hbuf, kBufLen * sizeof(uint32_t)));
  handoff_args[0] = &hbuf;
  handoff_args[1] = &arg_one;
  handoff_args[2] = &arg_len;
  CK(cuMemAlloc(&dsum, sizeof(uint64_t)));
  void* h;
  CK(cuMemHostAlloc(&h, kBufLen * sizeof(uint32_t), 0));
  hx = (uint32_t*)h;
  for (int i = 0; i < kBufLen; i++) hx[i] = (uint32_t)i;
  CK(cuMemHostAlloc(&h, sizeof *hres, 0));
  hres = (unsigned long long*)h;
  for (int i = 0; i < kPoolStreams; i++) CK(cuStreamCreate(&pool_free[pool_n++], CU_STREAM_NON_BLOCKING));

  // 10 axpb kernels captured into a graph, instantiated once.
  CUgraph g;
  CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
  for (int j = 0; j < kGraphKernels; j++)
    CK(cuLaunchKernel(f_axpb, 16, 1, 1, 256, 1, 1, 0, s1, axpb_args, NULL));
  CK(cuStreamEndCapture(s1, &g));
  CK(cuGraphInstantiateWithFlags(&graph10, g, 0));
  CK(cuGraphDestroy(g));
  CK(cuGraphLaunch(graph10, s1));
  CK(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, s1, NULL, NULL));
  CK(cuCtxSynchronize());

  setup_mlp();
}

// measure runs w like Go's testing.B: n=1 first, then grows n until a run lasts target_ns.
static void measure(const struct workload* w, double target_ns) {
  if (w->ready) {
    const char* why = w->ready();
    if (why) {
      printf("skip\t%s\t%s\n", w->id, why);
      fflush(stdout);
      return;
    }
  }
  long n = 1;
  double dt;
  for (;;) {
    dt = w->run(n);
    if (dt >= target_ns || n >= 1000000000L) break;
    double per = dt / (double)n;
    if (per < 1) per = 1;
    long next = (long)(target_ns * 1.2 / per);
    if (next > 100 * n) next = 100 * n;
    if (next <= n) next = n + 1;
    n = next;
  }
  printf("floor\t%s\t%.3f\t%ld\n", w->id, dt / (double)n, n);
  fflush(stdout);
}

static int selected(const char* id, int argc, char** args) {
  if (argc == 0) return 1;
  for (int i = 0; i < argc; i++) {
    size_t l = strlen(args[i]);
    if (strcmp(id, args[i]) == 0) return 1;
    if (l > 0 && strncmp(id, args[i], l) == 0 && (args[i][l - 1] == '/' || id[l] == '/')) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* ptx = "tools/bench/kernels.ptx";
  double seconds = 0.5;
  char* ids[256];
  int nids = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-ptx") == 0 && i + 1 < argc) {
      ptx = argv[++i];
    } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (strcmp(argv[i], "-blocking-sync") == 0) {
      blocking_sync = 1;
    } else if (strcmp(argv[i], "-list") == 0) {
      for (int k = 0; k < nworkloads; k++) printf("%s\n", workloads[k].id);
      return 0;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: floor [-ptx FILE] [-t SECONDS] [-blocking-sync] [-list] [ID|PREFIX ...]\n");
      return 2;
    } else if (nids < 256) {
      ids[nids++] = argv[i];
    }
  }
  setup(ptx);
  for (int k = 0; k < nworkloads; k++)
    if (selected(workloads[k].id, nids, ids)) measure(&workloads[k], seconds * 1e9);
  return 0;
}
