package cusolver

//go:generate go run ../gen -lib cusolver
