package main

import (
	"math"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"flowservice/pkg/httpapi"
	"flowservice/pkg/runworker"
)

// memoryBudget is the memory flowd budgets its runs and webhook bodies
// from (docs/reliability.md): FLOWD_MEMORY_LIMIT, else GOMEMLIMIT (which
// applyMemoryLimit has applied by now), else half the machine's memory.
func memoryBudget(cfg config) int64 {
	if cfg.MemoryLimit > 0 {
		return cfg.MemoryLimit
	}
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return l
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil && si.Totalram > 0 {
		return int64(uint64(si.Totalram)*uint64(si.Unit)) / 2
	}
	return 2 << 30
}

// runBytes is the worker pool's budget of run documents under way: an
// eighth of the memory budget (a run holds a few times its document while
// it executes), at least 16 MiB, at most runworker's default.
func runBytes(cfg config) int64 {
	return min(max(memoryBudget(cfg)/8, 16<<20), runworker.DefaultMaxBytes)
}

// bodyBytes is the receivers' budget of webhook bodies in flight, in wire
// bytes: a quarter of the memory budget over what a body byte may cost
// (httpapi.BodyCost). At least one body of the largest size always fits.
func bodyBytes(cfg config) int64 {
	return memoryBudget(cfg) / 4 / httpapi.BodyCost
}
