package cufft

//go:generate go run ../gen -lib cufft
