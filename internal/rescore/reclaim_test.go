package rescore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRunReclaim(t *testing.T) {
	saved := reclaims
	reclaims = nil
	t.Cleanup(func() { reclaims = saved })
	var n int
	OnReclaim(func() { n++ })
	OnReclaim(func() { n += 10 })
	RunReclaim()
	RunReclaim()
	assert.Equal(t, 22, n)
}
