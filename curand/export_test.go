package curand

import "github.com/gocuda/gocuda/cuda"

// IdleGeneratorsForTest returns the number of idle raw generators of ctx.
func IdleGeneratorsForTest(ctx *cuda.Context) int { return idleGenerators(ctx) }
