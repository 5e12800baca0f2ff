package goldb

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocuda/gocuda/gen/internal/golden/golda"
	"github.com/gocuda/gocuda/gen/internal/golden/goldentest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The call tests run goldb's bindings, whose signatures use golda's types, against
// testdata/goldb_impl.c compiled into a shared library at test time.

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "goldb")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lib := filepath.Join(dir, "libgoldb.so")
	if err := goldentest.SharedLib(lib, "testdata/goldb_impl.c"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv("GOCUDA_GOLDB_LIB", lib)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestCrossPackageTypes(t *testing.T) {
	assert.Equal(t, "libgoldb.so.2", Library().Soname())
	var ctx GoldbCtx = golda.GoldCtx(1) // an alias: no conversion needed
	require.NoError(t, Attach(ctx, golda.GOLD_MODE_FAST))
	assert.ErrorIs(t, Attach(ctx, golda.GOLD_MODE_NEG), ErrBusy)
	assert.ErrorIs(t, Attach(0, golda.GOLD_MODE_FAST), ErrLost)
	assert.Equal(t, "goldb: GOLDB_ERR_LOST (2): lost", Attach(0, 0).Error())
}

// TestStructByValue passes goldbPair, which holds golda structs, by value.
func TestStructByValue(t *testing.T) {
	pair := GoldbPair{Mode: golda.GOLD_MODE_NEG, P: golda.GoldPoint{X: 1.5, Y: -2.5}, Addr: 0x123456789abc}
	var desc golda.GoldDesc
	desc.SetLevel(int32(golda.GOLD_MODE_NEG))
	require.NoError(t, Use(1, &desc, pair))
	last, err := LastError()
	require.NoError(t, err)
	assert.Equal(t, golda.GOLD_STATUS_SUCCESS, last)

	desc.SetLevel(3)
	assert.ErrorIs(t, Use(1, &desc, pair), ErrBusy)
	last, err = LastError()
	require.NoError(t, err)
	assert.Equal(t, golda.GOLD_STATUS_INTERNAL_ERROR, last, "a golda status returned as a value")

	p, err := Origin(pair)
	require.NoError(t, err)
	assert.Equal(t, golda.GoldPoint{X: 0.5, Y: -2.5 + 0x1234}, p)
}
