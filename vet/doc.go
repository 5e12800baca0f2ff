// Package vet holds gocudavet's analyzers (golang.org/x/tools/go/analysis): checks,
// before a program runs, of the contracts of gocuda's objects that the compiler does
// not see. Close reports objects that are not closed on every path; UseAfterClose,
// uses after Close; RawAddr, raw addresses and handles that outlive their owner or
// cuda.Enqueue's ordering; Capture, calls in a stream capture that a graph cannot
// record; ReadOnly, buffers passed to a const T* kernel parameter without cuda.In.
//
// The analyzers match the module's types and functions by package path and name
// through go/types. They import none of the module's packages: they check programs
// that do. Command gocudavet (cmd/gocudavet) runs them; docs/vet.md describes them.
package vet
