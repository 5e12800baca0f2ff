package cufft_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cufft"
)

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cufft.CUFFT_INVALID_PLAN
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cufft.ErrInvalidPlan))
	// Output:
	// cufft: CUFFT_INVALID_PLAN (1): invalid plan
	// true
}
