package gonumblas

// WithKernels replaces cuBLAS with k32 and k64, ready to run: tests check the
// staging, the row-major mapping and the routing on a host stand-in, without a GPU.
func WithKernels(k32 kernels[float32], k64 kernels[float64]) Option {
	return func(impl *Implementation) {
		impl.k32, impl.k64 = k32, k64
		impl.ready = func() error { return nil }
	}
}

// GPUCalls returns the number of calls impl ran on the GPU.
func GPUCalls(impl *Implementation) int64 { return impl.gpuCalls.Load() }

// InPlaceOps returns the number of operands impl handed to the GPU in place.
func InPlaceOps(impl *Implementation) int64 { return impl.inPlaceOps.Load() }
