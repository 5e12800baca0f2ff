package rescore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunContextDestroy(t *testing.T) {
	saved := ctxDrops
	ctxDrops = nil
	t.Cleanup(func() { ctxDrops = saved })
	var got []uintptr
	OnContextDestroy(func(c uintptr) { got = append(got, c) })
	OnContextDestroy(func(c uintptr) { got = append(got, c+100) })
	RunContextDestroy(1)
	RunContextDestroy(2)
	assert.Equal(t, []uintptr{1, 101, 2, 102}, got, "every drop, in the order added, for each context")
}
