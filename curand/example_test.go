package curand_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/curand"
)

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = curand.CURAND_STATUS_NOT_INITIALIZED
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), curand.ErrNotInitialized))
	// Output:
	// curand: CURAND_STATUS_NOT_INITIALIZED (101): not initialized
	// true
}
