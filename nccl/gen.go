package nccl

//go:generate go run ../gen -lib nccl
