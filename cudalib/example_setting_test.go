package cudalib_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cudalib"
)

// fooGrain is a setting of a library that belongs to a context: 256 unless set for
// it. The library reads it where it prepares a handle, and again only once its
// Version changed.
var fooGrain = cudalib.NewSetting(256)

// A setting's value is the context's own, or the process default; a context's value
// goes with the context.
func ExampleSetting() {
	primary, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	ctx, err := cuda.NewContext(0, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := fooGrain.Set(ctx, 1024); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("primary:", fooGrain.Get(primary), "new context:", fooGrain.Get(ctx))
	if err := ctx.Close(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("closed:", fooGrain.Get(ctx), "set fails:", fooGrain.Set(ctx, 512) != nil)
	// Output:
	// primary: 256 new context: 1024
	// closed: 256 set fails: true
}
