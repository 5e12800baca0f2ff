package cublaslt_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublaslt/cublasltraw"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
)

// TestNoLibrary: where libcublasLt.so.13 cannot be loaded (CI), calls return its
// typed error, naming library, soname and variable; where it is present, this skips.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, cublasltraw.Library(), "cublaslt", cublasltraw.Soname, cublasltraw.SonameEnv,
		func() error { var h cublasltraw.CublasLtHandle; return cublasltraw.Create(&h) },
		func() error { _, err := cublasltraw.NewOwnedHandle(); return err },
		func() error {
			var d cublasltraw.CublasLtMatmulDesc
			return cublasltraw.MatmulDescCreate(&d, cublasraw.CUBLAS_COMPUTE_32F, cudaraw.CUDA_R_32F)
		},
	)
}

// TestStatusIsCublas: cuBLASLt's status is cuBLAS's type, so one set of sentinels
// serves both raw layers.
func TestStatusIsCublas(t *testing.T) {
	var err error = cublasraw.Status(cublasraw.CUBLAS_STATUS_NOT_SUPPORTED).Err()
	assert.True(t, errors.Is(err, cublasraw.ErrNotSupported))
	assert.NoError(t, cublasraw.Status(cublasraw.CUBLAS_STATUS_SUCCESS).Err())
}
