// while: the C floor of cuda's TestGPUConditionalWhileCount — a loop of 1,000
// iterations of a one-thread kernel run three ways: a conditional while node (one
// graph launch), driven by the host (launch a one-kernel graph, read the counter back,
// decide), and 1,000 graph launches queued without looking. Also the while node with
// its body unrolled u times (each kernel returns at once once the count is reached),
// to split the node's cost per iteration from the kernels'.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/while tools/floor/while.cu && /tmp/while
//
// Prints µs per iteration, the best of 5 runs, for 5 alternated rounds.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%d: %s: %s\n", __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

enum { ITERS = 1000, ROUNDS = 5 };

__global__ void count_to(unsigned* it, unsigned limit, cudaGraphConditionalHandle loop) {
  if (it[0] >= limit) { cudaGraphSetConditional(loop, 0); return; }
  unsigned k = ++it[0];
  cudaGraphSetConditional(loop, k < limit);
}
__global__ void count(unsigned* it) { ++it[0]; }

static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

// whileGraph returns a graph: a memset of the counter, then a while node whose body
// holds u count_to kernels in a chain.
static cudaGraphExec_t whileGraph(unsigned* counter, int u) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNode_t zero;
  cudaMemsetParams mp = {};
  mp.dst = counter; mp.value = 0; mp.elementSize = 4; mp.width = 1; mp.height = 1;
  CK(cudaGraphAddMemsetNode(&zero, g, NULL, 0, &mp));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t node;
  CK(cudaGraphAddNode(&node, g, &zero, NULL, 1, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  cudaGraphNode_t prev = NULL;
  for (int i = 0; i < u; i++) {
    unsigned limit = ITERS;
    void* args[] = {&counter, &limit, &h};
    cudaKernelNodeParams kp = {};
    kp.func = (void*)count_to; kp.gridDim = dim3(1); kp.blockDim = dim3(1); kp.kernelParams = args;
    cudaGraphNode_t k;
    CK(cudaGraphAddKernelNode(&k, body, prev ? &prev : NULL, prev ? 1 : 0, &kp));
    prev = k;
  }
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphDestroy(g));
  return e;
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* counter;
  CK(cudaMalloc(&counter, 4));
  unsigned* host;
  CK(cudaMallocHost(&host, 4));
  cudaGraphExec_t loop = whileGraph(counter, 1), loop4 = whileGraph(counter, 4);
  cudaGraph_t g1;
  CK(cudaGraphCreate(&g1, 0));
  void* args[] = {&counter};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)count; kp.gridDim = dim3(1); kp.blockDim = dim3(1); kp.kernelParams = args;
  cudaGraphNode_t kn;
  CK(cudaGraphAddKernelNode(&kn, g1, NULL, 0, &kp));
  cudaGraphExec_t step;
  CK(cudaGraphInstantiate(&step, g1, 0));

  auto whileRun = [&](cudaGraphExec_t e) { CK(cudaGraphLaunch(e, s)); CK(cudaStreamSynchronize(s)); };
  auto hostWhile = [&]() {
    CK(cudaMemsetAsync(counter, 0, 4, s));
    for (;;) {
      CK(cudaGraphLaunch(step, s));
      CK(cudaMemcpyAsync(host, counter, 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      if (*host >= ITERS) return;
    }
  };
  auto hostFor = [&]() {
    CK(cudaMemsetAsync(counter, 0, 4, s));
    for (int i = 0; i < ITERS; i++) CK(cudaGraphLaunch(step, s));
    CK(cudaStreamSynchronize(s));
  };
  const char* names[] = {"while", "while-unroll4", "host-while", "host-for"};
  double per[4][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    for (int w = 0; w < 4; w++) {
      double best = 1e30;
      for (int k = 0; k < 6; k++) { // the first is a warm-up
        double t0 = now();
        switch (w) {
        case 0: whileRun(loop); break;
        case 1: whileRun(loop4); break;
        case 2: hostWhile(); break;
        case 3: hostFor(); break;
        }
        double t = now() - t0;
        if (k > 0) best = std::min(best, t);
      }
      CK(cudaMemcpy(host, counter, 4, cudaMemcpyDeviceToHost));
      if (*host != ITERS) { fprintf(stderr, "%s: counter %u\n", names[w], *host); return 1; }
      per[w][r] = best / ITERS;
    }
  }
  for (int w = 0; w < 4; w++) {
    double sorted[ROUNDS];
    std::copy(per[w], per[w] + ROUNDS, sorted);
    std::sort(sorted, sorted + ROUNDS);
    printf("%-14s µs/iteration: %.2f (rounds", names[w], sorted[ROUNDS / 2]);
    for (int r = 0; r < ROUNDS; r++) printf(" %.2f", per[w][r]);
    printf(")\n");
  }
  return 0;
}
