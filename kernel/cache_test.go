package kernel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gocuda/gocuda/kernel"
)

// countingCompiler is a stand-in for NVRTC: the image is the source and arch.
func countingCompiler(n *int) func(src, name, arch string) ([]byte, error) {
	return func(src, name, arch string) ([]byte, error) {
		*n++
		return []byte(arch + ":" + src), nil
	}
}

// A kernel is compiled once per source and architecture: then found in memory, and
// by another process's cache (a new Cache on the same Dir) on disk; another
// driver or NVRTC version is another key.
func TestCacheCompilesOnce(t *testing.T) {
	var n int
	defer kernel.SetCompiler(countingCompiler(&n), "driver 13000 nvrtc 13.0")()
	dir := t.TempDir()
	c := &kernel.Cache{Dir: dir}
	img, err := c.Lookup("src A", "a", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, "sm_90:src A", string(img))
	_, err = c.Lookup("src A", "a", "sm_90")
	require.NoError(t, err)
	_, err = c.Lookup("src A", "a", "sm_80")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, kernel.CacheStats{Compiles: 2, Hits: 1}, c.Stats())

	other := &kernel.Cache{Dir: dir}
	img, err = other.Lookup("src A", "a", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, "sm_90:src A", string(img))
	assert.Equal(t, kernel.CacheStats{DiskHits: 1}, other.Stats())
	assert.Equal(t, 2, n, "found on disk")

	defer kernel.SetCompiler(countingCompiler(&n), "driver 13010 nvrtc 13.0")()
	_, err = (&kernel.Cache{Dir: dir}).Lookup("src A", "a", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "a new driver compiles again")

	memOnly := &kernel.Cache{}
	_, err = memOnly.Lookup("src A", "a", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, 4, n, "no Dir: nothing shared with the others")
}

// A corrupt or truncated file is compiled again and replaced, never used.
func TestCacheCorruptEntry(t *testing.T) {
	var n int
	defer kernel.SetCompiler(countingCompiler(&n), "v")()
	dir := t.TempDir()
	_, err := (&kernel.Cache{Dir: dir}).Lookup("src", "k", "sm_90")
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	for _, damage := range []func(b []byte) []byte{
		func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, // a flipped bit in the image
		func(b []byte) []byte { return b[:10] },              // truncated
		func(b []byte) []byte { b[0] = 'X'; return b },       // not ours
	} {
		b, err := os.ReadFile(files[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(files[0], damage(b), 0o600))
		before := n
		img, err := (&kernel.Cache{Dir: dir}).Lookup("src", "k", "sm_90")
		require.NoError(t, err)
		assert.Equal(t, "sm_90:src", string(img))
		assert.Equal(t, before+1, n, "compiled again")
		c := &kernel.Cache{Dir: dir}
		_, err = c.Lookup("src", "k", "sm_90")
		require.NoError(t, err)
		assert.Equal(t, int64(1), c.Stats().DiskHits, "and the file replaced")
	}
}

// Past MaxBytes the least recently used files go.
func TestCacheTrim(t *testing.T) {
	var n int
	defer kernel.SetCompiler(countingCompiler(&n), "v")()
	dir := t.TempDir()
	big := strings.Repeat("x", 1000)
	c := &kernel.Cache{Dir: dir, MaxBytes: 2500}
	for _, s := range []string{"1", "2"} {
		_, err := c.Lookup(big+s, "k", "sm_90")
		require.NoError(t, err)
	}
	// "1" is used again (from disk, by another cache), so "2" is the oldest.
	old := time.Now().Add(-time.Hour)
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	for _, f := range files {
		require.NoError(t, os.Chtimes(f, old, old))
	}
	_, err := (&kernel.Cache{Dir: dir, MaxBytes: 2500}).Lookup(big+"1", "k", "sm_90")
	require.NoError(t, err)
	_, err = c.Lookup(big+"3", "k", "sm_90")
	require.NoError(t, err)
	files, _ = filepath.Glob(filepath.Join(dir, "*.bin"))
	assert.Len(t, files, 2, "one evicted")
	before := n
	_, err = (&kernel.Cache{Dir: dir}).Lookup(big+"1", "k", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, before, n, "the recently used one stayed")
	_, err = (&kernel.Cache{Dir: dir}).Lookup(big+"2", "k", "sm_90")
	require.NoError(t, err)
	assert.Equal(t, before+1, n, "the least recently used one went")
}
