// Package layers holds no code: its test is the module's import-layer check, which
// fails on a forbidden import, so that the layers a reader sees from the folder
// names stay the layers the code has. The floors, top-down, and the rules are in
// layers_test.go.
//
// It is a test, not a tool: CI runs it with every other test (go test ./...), and
// nobody runs it by hand. It sits in internal/ because it imports nothing of the
// module (it reads the imports through go list), so it stands on the ground floor
// with the other packages there, and it adds no API.
package layers
