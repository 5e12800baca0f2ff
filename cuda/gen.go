package cuda

//go:generate go run ../gen -lib cuda
