package vet_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/gocuda/gocuda/vet"
)

// testdata is the module of the analyzers' test programs: it requires this module
// (replaced by the tree), so that the programs use the real API.
func testdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestClose(t *testing.T) { analysistest.Run(t, testdata(t), vet.Close, "./close") }

func TestUseAfterClose(t *testing.T) {
	analysistest.Run(t, testdata(t), vet.UseAfterClose, "./useafterclose")
}

func TestCapture(t *testing.T) { analysistest.Run(t, testdata(t), vet.Capture, "./capture") }

func TestReadOnly(t *testing.T) { analysistest.Run(t, testdata(t), vet.ReadOnly, "./readonly") }

func TestRawAddr(t *testing.T) { analysistest.Run(t, testdata(t), vet.RawAddr, "./rawaddr") }
