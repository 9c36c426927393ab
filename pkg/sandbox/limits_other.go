//go:build !linux

package sandbox

import (
	"syscall"
	"time"
)

// Outside Linux a child gets no rlimits: only the parent's kill at the
// timeout and the child's own checks bound it. Production runs on Linux.

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func setLimits(int, uint64, time.Duration) error { return nil }

func addressSpace(int) (uint64, error) { return 0, nil }

func limitCPU(time.Duration) {}

func cpuTime() time.Duration { return 0 }
