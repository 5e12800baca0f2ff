package nccl_test

import (
	"context"
	"testing"

	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
)

// These tests need no GPU and no NCCL library: they run in CI.

// TestNoLibrary: where libnccl.so.2 cannot be loaded (CI), calls return its typed error.
func TestNoLibrary(t *testing.T) {
	cudatest.NoLibrary(t, ncclraw.Library(), "nccl", ncclraw.Soname, ncclraw.SonameEnv,
		func() error { var v int32; return ncclraw.GetVersion(&v) },
		func() error { var c ncclraw.NcclComm; dev := int32(0); return ncclraw.CommInitAll(&c, 1, &dev) },
		func() error {
			return ncclraw.AllReduce(nil, nil, 0, ncclraw.NcclFloat32, ncclraw.NcclSum, 0, 0)
		},
		func() error { _, err := ncclraw.GetErrorString(ncclraw.NcclInvalidArgument); return err },
		func() error { var nc ncclraw.NcclComm; return ncclraw.CommShrink(0, nil, 0, &nc, nil, 0) },
		func() error { _, err := nccl.NewComms(context.Background(), 0); return err },
		func() error {
			_, err := nccl.Join(context.Background(), &nccl.ConnRendezvous{}, 0, 1, 0)
			return err
		},
	)
}

// TestStatusErrors checks the Result error values, which need no library.
func TestStatusErrors(t *testing.T) {
	// The sentinel names and descriptions are the generator's, from NCCL's camel-case
	// enumerators (ncclInvalidArgument → ErrInvalidArgument, "invalid argument").
	cudatest.StatusErrors(t, ncclraw.NcclInvalidArgument, "ncclInvalidArgument", 4, "invalid argument",
		ncclraw.ErrInvalidArgument, ncclraw.ErrSystemError, ncclraw.Result(123456), ncclraw.NcclSuccess, "Result")
}
