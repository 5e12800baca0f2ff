package curand

import "github.com/gocuda/gocuda/cuda"

// IdleGeneratorsForTest returns the number of idle raw generators of ctx and kind.
func IdleGeneratorsForTest(ctx *cuda.Context, kind CurandRngType) int {
	return idleGenerators(ctx, kind)
}
