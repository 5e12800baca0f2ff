package reclaimhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRun(t *testing.T) {
	var n int
	Register(func() { n++ })
	Register(func() { n += 10 })
	Run()
	Run()
	assert.Equal(t, 22, n)
}
