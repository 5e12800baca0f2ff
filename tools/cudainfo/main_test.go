package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/cudnn/cudnnraw"
	"github.com/gocuda/gocuda/cufft/cufftraw"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/curand/curandraw"
	"github.com/gocuda/gocuda/cusolver/cusolverraw"
	"github.com/gocuda/gocuda/cusparse/cusparseraw"
	"github.com/gocuda/gocuda/dl"
	"github.com/gocuda/gocuda/nccl/ncclraw"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
	"github.com/gocuda/gocuda/nvml/nvmltest"
	"github.com/gocuda/gocuda/nvrtc/nvrtcraw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs the report on the strict fake driver and the fake NVML where there is
// no GPU (CI).
func TestMain(m *testing.M) {
	cleanup, _, err := nvmltest.Install()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cudainfo: %v; running the tests without NVML\n", err)
	}
	code := cudatest.Main(m)
	cleanup()
	os.Exit(code)
}

// runReport runs the report as main does; on the fake driver, which runs no kernel,
// without the self-check's kernel.
func runReport(t *testing.T) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := report(&out, options{kernels: !cudatest.FakeLoaded()})
	for _, l := range []*dl.Library{cudaraw.Library(), cublasraw.Library(), cufftraw.Library(), curandraw.Library(), cusparseraw.Library(),
		cudnnraw.Library(), cusolverraw.Library(), nvrtcraw.Library(), ncclraw.Library(), nvmlraw.Library(), cuptiraw.Library()} {
		assert.Contains(t, out.String(), l.Soname())
	}
	t.Log("\n" + out.String())
	return out.String(), err
}

// With a driver (the fake in CI, the GPU machine) every device passes the
// self-check and its memory pools are reported.
func TestReport(t *testing.T) {
	if cudaraw.Library().Open() != nil {
		t.Skip("no CUDA driver (TestReportNoDriver covers it)")
	}
	out, err := runReport(t)
	require.NoError(t, err, out)
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	for i := range n {
		assert.Contains(t, out, "self-check device "+strconv.Itoa(i)+": ok")
		assert.Contains(t, out, "device "+strconv.Itoa(i)+" (primary context)")
	}
	if n == 1 {
		assert.Contains(t, out, "peer access: one device, no peer (the matrix is trivial)")
	}
	if nvmlraw.Library().Open() != nil {
		assert.Contains(t, out, "health: NVML not available")
		return
	}
	assert.Contains(t, out, "health (NVML, driver ")
	for _, want := range []string{"utilization: GPU ", "memory: ", "clocks: SM ", "power: ", "temperature: ", "ECC: ",
		"retired pages: ", "remapped rows: ", "throttle reasons: ", "MIG: "} {
		assert.Contains(t, out, "    "+want)
	}
	if nvmltest.Loaded() {
		assert.Contains(t, out, "  device 0 (NVML 0, GPU-66616b65-6375-6461-0000-000000000000, 00000000:01:00.0):")
		assert.Contains(t, out, "    utilization: GPU 40%, memory 20%")
		assert.Contains(t, out, "    retired pages: not supported")
		assert.Contains(t, out, "    throttle reasons: gpu idle, sw power cap")
		assert.Contains(t, out, "    power: 123.5 W, limit 700.0 W")
	}
}

// Two devices (FAKECUDA_DEVICES=2 on the fake, in a subprocess): both are listed and
// checked, their pools reported, and the peer matrix shows each reaching the other.
func TestReportTwoDevices(t *testing.T) {
	if cudatest.Active() {
		cudatest.Subprocess(t, map[string]string{"FAKECUDA_DEVICES": "2"})
		return
	}
	if cudaraw.Library().Open() != nil {
		t.Skip("no CUDA driver")
	}
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	if n < 2 {
		t.Skipf("needs two devices, found %d (the fake runs it with FAKECUDA_DEVICES=2)", n)
	}
	out, err := runReport(t)
	require.NoError(t, err, out)
	assert.Contains(t, out, "devices: "+strconv.Itoa(n))
	assert.Contains(t, out, "peer access (row device accesses column device's memory")
	assert.Regexp(t, `(?m)^  from 0  -\s+(yes|no)`, out)
	assert.Regexp(t, `(?m)^  from 1  (yes|no)[^\n]*-`, out)
	for i := range n {
		assert.Contains(t, out, "self-check device "+strconv.Itoa(i)+": ok")
		assert.Contains(t, out, "device "+strconv.Itoa(i)+" (primary context)")
	}
	if cudatest.Strict() {
		assert.Regexp(t, `(?m)^  from 0  -\s+yes r0 atomics\s*$`, out)
		assert.Regexp(t, `(?m)^  from 1  yes r0 atomics\s+-\s*$`, out)
	}
}

// Without a driver the report lists what it looked for and fails with a clear error.
func TestReportNoDriver(t *testing.T) {
	if cudatest.FakeLoaded() {
		cudatest.RunWithoutDriver(t)
		return
	}
	if cudaraw.Library().Open() == nil {
		t.Skip("a CUDA driver is installed")
	}
	_, err := runReport(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no CUDA driver")
	assert.Contains(t, err.Error(), "GOCUDA_CUDA_LIB")
}
