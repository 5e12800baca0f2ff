// Package cublaslt is the home of gocuda's cuBLASLt binding. Its raw layer,
// cublasltraw, binds every function of cublasLt.h, generated from the unedited header
// like the other libraries' raw layers; the idiomatic API is package cublas's
// (Matmul: a GEMM with a fused bias and activation), so this package has no API of
// its own.
package cublaslt

//go:generate go run ../gen -lib cublaslt
