package cublas

//go:generate go run ../gen -lib cublas
