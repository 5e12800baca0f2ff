module vettest

go 1.26.0

require github.com/gocuda/gocuda v0.0.0

replace github.com/gocuda/gocuda => ../..
