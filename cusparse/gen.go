package cusparse

//go:generate go run ../gen -lib cusparse
