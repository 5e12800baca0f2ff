package cudnn

//go:generate go run ../gen -lib cudnn
