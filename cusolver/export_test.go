package cusolver

import "github.com/gocuda/gocuda/cuda"

// IdleHandlesForTest returns the number of idle handles of ctx.
func IdleHandlesForTest(ctx *cuda.Context) int { return idleHandles(ctx) }

// KeptHandlesForTest returns the number of ctx's handles that streams keep.
func KeptHandlesForTest(ctx *cuda.Context) int { return handles.Kept(ctx) }
