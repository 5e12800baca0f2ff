package golda

import (
	"errors"
	"runtime"

	"github.com/gocuda/gocuda/internal/errs"
	"github.com/gocuda/gocuda/resource"
)

// Queue is the handwritten type of the goldQueue_t resource row (handwritten =
// "Queue" in golda.toml), as cuda.Stream is of CUstream's: the generator emits no
// OwnedQueue beside it, so the resource has one type. It releases in the row's
// blocking class (non-blocking) and closes the way every gocuda type does.
type Queue struct {
	h   GoldQueue
	reg *resource.Registration
}

// NewQueue creates a goldQueue_t with goldQueueCreate.
func NewQueue() (*Queue, error) {
	var h GoldQueue
	if err := QueueCreate(&h); err != nil {
		return nil, err
	}
	q := &Queue{h: h}
	q.reg = resource.ResourceFinalizer(func(q *Queue) error { return QueueDestroy(q.h) }, q, false,
		resource.Kind("goldQueueDestroy"))
	return q, nil
}

// Close destroys the queue now. Closing again, or closing a nil Queue, returns an
// error that matches cuda.ErrClosed and resource.ErrReleased.
func (q *Queue) Close() error {
	if q == nil {
		return errs.Closed("golda: Queue")
	}
	err := q.reg.Release()
	runtime.KeepAlive(q)
	if errors.Is(err, resource.ErrReleased) {
		return errs.Closed("golda: Queue")
	}
	return err
}
