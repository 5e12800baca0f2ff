package cufft

import "github.com/gocuda/gocuda/cuda"

// IdlePlansForTest returns the number of idle plans of ctx.
func IdlePlansForTest(ctx *cuda.Context) int { return idlePlans(ctx) }

// StreamPlansForTest returns the number of ctx's plans that streams keep.
func StreamPlansForTest(ctx *cuda.Context) int { return streamPlans(ctx) }
