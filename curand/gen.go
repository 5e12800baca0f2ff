package curand

//go:generate go run ../gen -lib curand
