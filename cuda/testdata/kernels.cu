// Kernels for the tests and benchmarks of package cuda. kernels.ptx beside this file is
// compiled from it, on a machine with the CUDA toolkit, from the repository root:
//
//	nvcc -ptx -arch=sm_90 -o cuda/testdata/kernels.ptx cuda/testdata/kernels.cu
//
// Every kernel is extern "C", so its name in the module is the name written here.
#include <stdint.h>

extern "C" {

// magic is a module global for Module.Global.
__device__ uint32_t magic = 0xC0FFEE;

// empty does nothing: launch cost only.
__global__ void empty() {}

static __device__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// spin keeps every thread busy for ns nanoseconds of GPU time.
__global__ void spin(uint64_t ns) {
  uint64_t start = globaltimer();
  while (globaltimer() - start < ns) {
  }
}

// fill_u32 sets p[0..n) to v (any grid: grid-stride loop).
__global__ void fill_u32(uint32_t* p, uint32_t v, uint64_t n) {
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

// axpy_f32 computes y[i] = a*x[i] + y[i] for i < n (one thread per element).
__global__ void axpy_f32(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// mixed_g is the struct argument of mixed: 16 bytes, 8-byte aligned.
struct mixed_g {
  int x;
  float y;
  double z;
};

// mixed writes every argument to out, widened to 64 bits (floating point as bits),
// so a test can check that each kind of argument arrived intact:
// out = {a, b, c, d, bits(e), bits(f), g.x, bits(g.y), bits(g.z)}. One thread writes.
__global__ void mixed(int8_t a, int16_t b, int32_t c, int64_t d, float e, double f, mixed_g g,
                      uint64_t* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  union { float f; uint32_t u; } e_bits, gy_bits;
  union { double f; uint64_t u; } f_bits, gz_bits;
  e_bits.f = e;
  f_bits.f = f;
  gy_bits.f = g.y;
  gz_bits.f = g.z;
  out[0] = (uint64_t)(int64_t)a;
  out[1] = (uint64_t)(int64_t)b;
  out[2] = (uint64_t)(int64_t)c;
  out[3] = (uint64_t)d;
  out[4] = e_bits.u;
  out[5] = f_bits.u;
  out[6] = (uint64_t)(int64_t)g.x;
  out[7] = gy_bits.u;
  out[8] = gz_bits.u;
}

// read_sum spins for spin_ns nanoseconds, then adds p[0..n) into *out (which the caller
// zeroes first; any grid). Tests use it to hold device memory in use by a kernel.
__global__ void read_sum(const uint32_t* p, uint64_t n, uint64_t spin_ns, unsigned long long* out) {
  uint64_t start = globaltimer();
  while (globaltimer() - start < spin_ns) {
  }
  unsigned long long sum = 0;
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) sum += p[i];
  atomicAdd(out, sum);
}

// add_u32 adds v to p[0..n) (any grid: grid-stride loop). Its PTX in kernels.ptx was written
// by hand after fill_u32's (identical to what nvcc 11.8 emits for it; the rest of the file is
// nvcc 13.0's), so recompiling may change it. tools/bench/kernels.ptx has the same code (with
// fill_u32 and read_sum), so the C floor (tools/floor) and this package's benchmarks run the
// same kernels.
__global__ void add_u32(uint32_t* p, uint32_t v, uint64_t n) {
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] += v;
}

}  // extern "C"
