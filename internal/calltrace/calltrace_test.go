package calltrace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSetLoad(t *testing.T) {
	t.Cleanup(func() { Set(nil) })
	assert.Nil(t, Load(), "no hook until a timeline sets one")
	var begun []string
	h := &Hook{Begin: func(op string) uint64 { begun = append(begun, op); return uint64(len(begun)) }, End: func(uint64) {}}
	assert.True(t, CompareAndSet(nil, h))
	assert.False(t, CompareAndSet(nil, &Hook{}), "a second timeline does not take the first one's place")
	assert.Same(t, h, Load())
	assert.Equal(t, uint64(1), Load().Begin("Launch"))
	assert.Equal(t, []string{"Launch"}, begun)
	assert.Same(t, h, Set(nil))
	assert.Nil(t, Load())
}
