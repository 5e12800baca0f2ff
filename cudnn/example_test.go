package cudnn_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cudnn"
)

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cudnn.CUDNN_STATUS_BAD_PARAM
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cudnn.ErrBadParam))
	// Output:
	// cudnn: CUDNN_STATUS_BAD_PARAM (2000): bad param
	// true
}
