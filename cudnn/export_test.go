package cudnn

import "github.com/gocuda/gocuda/cuda"

// IdleHandlesForTest returns the number of idle handles of ctx.
func IdleHandlesForTest(ctx *cuda.Context) int { return idleHandles(ctx) }

// KeptHandlesForTest returns the number of ctx's handles that streams keep.
func KeptHandlesForTest(ctx *cuda.Context) int { return handles.Kept(ctx) }

// CachedAlgorithmsForTest returns the number of cached algorithm choices of ctx.
func CachedAlgorithmsForTest(ctx *cuda.Context) int { return len(cachedChoices(ctx)) }

// MaxCachedWorkspaceForTest returns the largest workspace, in bytes, of the cached
// algorithm choices of ctx.
func MaxCachedWorkspaceForTest(ctx *cuda.Context) int {
	most := 0
	for _, c := range cachedChoices(ctx) {
		most = max(most, int(c.workspace))
	}
	return most
}
