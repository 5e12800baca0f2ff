package errs_test

import (
	"errors"
	"testing"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
	"github.com/stretchr/testify/assert"
)

func TestClosed(t *testing.T) {
	err := errs.Closed("cuda: stream")
	assert.ErrorIs(t, err, errs.ErrClosed)
	assert.ErrorIs(t, err, resource.ErrReleased)
	assert.Equal(t, "cuda: stream: already closed: gocuda: use of a closed object (resource: already released)", err.Error())
	assert.False(t, errors.Is(errs.ErrClosed, resource.ErrReleased), "a use after Close is not a second release")
}
