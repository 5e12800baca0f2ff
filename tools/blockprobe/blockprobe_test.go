package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realHeaders is the repository's headers directory, read by the tests as it is.
const realHeaders = "../../headers"

func TestClassify(t *testing.T) {
	cases := []struct {
		blocking bool
		callerMs float64
		want     Verdict
	}{
		{false, 0.002, VerdictOK},
		{false, 1.0, VerdictOK}, // the threshold itself is not blocked
		{false, 1.01, VerdictBlocksUnclassed},
		{false, 499, VerdictBlocksUnclassed},
		{true, 499, VerdictOK},
		{true, 1.5, VerdictOK},
		{true, 0.012, VerdictDoesNotBlock},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Classify(c.blocking, c.callerMs), "blocking=%v caller=%v", c.blocking, c.callerMs)
	}
	assert.False(t, VerdictOK.Failed())
	assert.False(t, VerdictInfo.Failed(), "another release than the row's destroy is not judged")
	for _, v := range []Verdict{VerdictBlocksUnclassed, VerdictDoesNotBlock, VerdictNoProbe, VerdictError} {
		assert.True(t, v.Failed(), v)
	}
}

func TestEveryDestroyHasAProbe(t *testing.T) {
	rows, err := LoadResources(realHeaders)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		assert.NotEmpty(t, r.Destroy, "%s %s: no destroy", r.Lib, r.Type)
		ps := probes[r.Destroy]
		if assert.NotEmpty(t, ps, "%s: [[resource]] %s destroys with %s, which has no probe in tools/blockprobe/probes.go", r.Lib, r.Type, r.Destroy) {
			for _, p := range ps {
				assert.NotNil(t, p.Make, r.Destroy)
			}
		}
	}
}

func TestNoStaleProbes(t *testing.T) {
	rows, err := LoadResources(realHeaders)
	require.NoError(t, err)
	known := map[string]bool{}
	for _, r := range rows {
		known[r.Destroy] = true
	}
	for name := range probes {
		assert.True(t, known[name], "probe %s matches no [[resource]] destroy in %s", name, realHeaders)
	}
}

func TestLoadResources(t *testing.T) {
	dir := t.TempDir()
	spec := `
[library]
name = "x"

[[resource]]
type = "xHandle_t"
go = "Handle"
create = ["xCreate"]
destroy = "xDestroy"
blocking = true
why = "measured"

[[resource]]
type = "xDesc_t"
go = "Desc"
create = ["xCreateDesc", "xCreateDesc2"]
destroy = "xDestroyDesc"
blocking = false
why = "host only"
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.toml"), []byte(spec), 0o644))
	rows, err := LoadResources(dir)
	require.NoError(t, err)
	assert.Equal(t, []Resource{
		{Lib: "x", Type: "xHandle_t", Go: "Handle", Create: []string{"xCreate"}, Destroy: "xDestroy", Blocking: true, Why: "measured"},
		{Lib: "x", Type: "xDesc_t", Go: "Desc", Create: []string{"xCreateDesc", "xCreateDesc2"}, Destroy: "xDestroyDesc", Why: "host only"},
	}, rows)

	_, err = LoadResources(t.TempDir())
	assert.ErrorContains(t, err, "no *.toml")
}

func TestPlans(t *testing.T) {
	rows := []Resource{
		{Lib: "cuda", Destroy: "cuMemFree_v2", Blocking: true},
		{Lib: "cuda", Destroy: "cuNoSuchDestroy", Blocking: false},
		{Lib: "cusparse", Destroy: "cusparseDestroy"},
	}
	plans := Plans(rows)
	var names []string
	for _, p := range plans {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"cuMemFree_v2", "cuMemFree_v2 (managed)", "cuNoSuchDestroy", "cusparseDestroy", "cusparseDestroy (used)",
		"cuCtxSynchronize (reference)"}, names)
	assert.Nil(t, plans[2].Probe)
	assert.True(t, plans[5].Blocking)
	assert.Equal(t, VerdictNoProbe, probeOne(nil, plans[2]).Verdict)
}

func TestOutput(t *testing.T) {
	outs := []Outcome{
		{Name: "cuMemFree_v2", Lib: "cuda", Blocking: true, Measured: true, CallerMs: 498.9651, OtherMs: 478.8, Verdict: VerdictOK},
		{Name: "cusparseDestroy", Lib: "cusparse", Measured: true, CallerMs: 0.002, OtherMs: 0.045, Verdict: VerdictOK},
		{Name: "cuNoSuchDestroy", Lib: "cuda", Verdict: VerdictNoProbe},
		{Name: "cudnnDestroy", Lib: "cudnn", Blocking: true, Verdict: VerdictError, Detail: "create: not found"},
	}
	assert.Equal(t, "block\tcuMemFree_v2\tclassed blocking\tcaller 498.965 ms\tother-thread launch 478.800 ms\tok", outs[0].Line())
	assert.Equal(t, "block\tcusparseDestroy\tclassed non-blocking\tcaller 0.002 ms\tother-thread launch 0.045 ms\tok", outs[1].Line())
	assert.Equal(t, "block\tcuNoSuchDestroy\tclassed non-blocking\tcaller - ms\tother-thread launch - ms\tno probe", outs[2].Line())
	assert.Equal(t, "block\tcudnnDestroy\tclassed blocking\tcaller - ms\tother-thread launch - ms\terror: create: not found", outs[3].Line())

	failed := Failures(outs)
	require.Len(t, failed, 2)
	assert.Equal(t, "cuNoSuchDestroy", failed[0].Name)

	md := Markdown(outs, 500)
	assert.Contains(t, md, "| release | lib | classed | caller | other-thread launch | verdict |")
	assert.Contains(t, md, "| `cuMemFree_v2` | cuda | blocking | 498.965 ms | 478.800 ms | ok |")
	assert.Contains(t, md, "| `cuNoSuchDestroy` | cuda | non-blocking | - | - | no probe |")

	path := filepath.Join(t.TempDir(), "b.tsv")
	require.NoError(t, WriteTSV(path, outs))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 5)
	assert.Equal(t, "destroy\tlib\tclass\tcaller_ms\tother_thread_launch_ms\tverdict", lines[0])
	assert.Equal(t, "cusparseDestroy\tcusparse\tnon-blocking\t0.002\t0.045\tok", lines[2])
}

func TestPTXHasKernels(t *testing.T) {
	for _, k := range []string{".visible .entry spin(", ".visible .entry empty()", "%globaltimer", ".target sm_90"} {
		assert.Contains(t, kernelsPTX, k)
	}
}

// A release classed blocking is right when any of its variants blocks.
func TestSettleVariants(t *testing.T) {
	outs := []Outcome{
		{Name: "cusparseDestroyCsrilu02Info", Blocking: true, Measured: true, CallerMs: 0.03, Verdict: VerdictDoesNotBlock},
		{Name: "cusparseDestroyCsrilu02Info (fresh)", Blocking: true, Measured: true, CallerMs: 499, Verdict: VerdictOK},
		{Name: "cufftDestroy", Blocking: true, Measured: true, CallerMs: 0.02, Verdict: VerdictDoesNotBlock},
	}
	SettleVariants(outs)
	assert.Equal(t, VerdictOK, outs[0].Verdict)
	assert.Equal(t, VerdictOK, outs[1].Verdict)
	assert.Equal(t, VerdictDoesNotBlock, outs[2].Verdict, "no variant blocks")
}

// A probe of another release than the row's destroy (ncclCommAbort beside ncclCommDestroy)
// is planned under its own name, measured once, reported as VerdictInfo and never settles
// the destroy's variants.
func TestOtherRelease(t *testing.T) {
	rows := []Resource{{Lib: "nccl", Destroy: "ncclCommDestroy", Blocking: true}}
	plans := Plans(rows)
	var names []string
	for _, p := range plans {
		names = append(names, p.Name)
		assert.Equal(t, strings.HasPrefix(p.Name, "ncclCommAbort"), p.Info, p.Name)
	}
	assert.Equal(t, []string{"ncclCommDestroy (fresh)", "ncclCommDestroy (used)", "ncclCommAbort (fresh)", "ncclCommAbort (used)",
		"cuCtxSynchronize (reference)"}, names)

	outs := []Outcome{
		{Name: "ncclCommDestroy (fresh)", Lib: "nccl", Blocking: true, Measured: true, CallerMs: 0.05, Verdict: VerdictDoesNotBlock},
		{Name: "ncclCommAbort (fresh)", Lib: "nccl", Blocking: true, Measured: true, CallerMs: 499, Verdict: VerdictInfo, Detail: blockedText(499), Info: true},
		{Name: "ncclCommAbort (used)", Lib: "nccl", Blocking: true, Measured: true, CallerMs: 0.2, Verdict: VerdictInfo, Detail: blockedText(0.2), Info: true},
	}
	SettleVariants(outs)
	assert.Equal(t, VerdictDoesNotBlock, outs[0].Verdict, "an abort that blocks does not settle the destroy")
	assert.Equal(t, VerdictInfo, outs[1].Verdict)
	assert.Equal(t, "block\tncclCommAbort (fresh)\tclassed none\tcaller 499.000 ms\tother-thread launch 0.000 ms\tnot judged (not the row's destroy): blocked", outs[1].Line())
	assert.Equal(t, "did not block", outs[2].Detail)
	failed := Failures(outs)
	require.Len(t, failed, 1)
	assert.Equal(t, "ncclCommDestroy (fresh)", failed[0].Name)
	assert.Contains(t, Markdown(outs, 500), "| `ncclCommAbort (used)` | nccl | none | 0.200 ms | 0.000 ms | not judged (not the row's destroy): did not block |")
}

// The NCCL communicator probes measure ncclCommDestroy and ncclCommAbort, fresh and used.
func TestNCCLProbes(t *testing.T) {
	ps := probes["ncclCommDestroy"]
	var got []string
	for _, p := range ps {
		require.NotNil(t, p.Make)
		got = append(got, p.Release+"/"+p.Variant)
	}
	assert.Equal(t, []string{"/fresh", "/used", "ncclCommAbort/fresh", "ncclCommAbort/used"}, got)
}
