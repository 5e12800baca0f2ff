// Package cupti is the home of gocuda's CUPTI support, the CUDA Profiling Tools
// Interface. Its raw layer, cuptiraw, binds every function of cupti.h and the headers
// it includes (activity, callbacks, events, metrics), generated from the unedited
// headers like the other libraries' raw layers; this package has no API of its own yet.
package cupti

//go:generate go run ../gen -lib cupti
