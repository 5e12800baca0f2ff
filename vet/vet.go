package vet

import "golang.org/x/tools/go/analysis"

// Analyzers are all the checks of gocudavet, in the order of docs/vet.md.
var Analyzers = []*analysis.Analyzer{Close, UseAfterClose, RawAddr, Capture, ReadOnly}
