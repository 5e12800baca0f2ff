package cusparse_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cusparse"
)

// Statuses are errors that work without the library loaded.
func Example_errors() {
	var err error = cusparse.CUSPARSE_STATUS_INVALID_VALUE
	fmt.Println(err)
	fmt.Println(errors.Is(fmt.Errorf("call: %w", err), cusparse.ErrInvalidValue))
	// Output:
	// cusparse: CUSPARSE_STATUS_INVALID_VALUE (3): invalid value
	// true
}
