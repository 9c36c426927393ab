package main

import (
	"math"
	"runtime/debug"

	"flowservice/pkg/runworker"
)

// runBytes is the worker pool's budget of run documents under way: an
// eighth of the memory limit (FLOWD_MEMORY_LIMIT, or GOMEMLIMIT, which
// applyMemoryLimit has set by now) when there is one (a run holds a few
// times its document while it executes, and bodies being received have
// their own share), else runworker's default.
func runBytes(cfg config) int64 {
	limit := cfg.MemoryLimit
	if l := debug.SetMemoryLimit(-1); limit == 0 && l < math.MaxInt64 {
		limit = l
	}
	if limit > 0 {
		return max(limit/8, 16<<20)
	}
	return runworker.DefaultMaxBytes
}
