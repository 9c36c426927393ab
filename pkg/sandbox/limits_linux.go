package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// childAttr makes a child die with its parent and keeps it out of the
// parent's terminal signals.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// setLimits puts the hard limits on a started child, before it is given
// any script: address space (its idle size plus the script's share), CPU
// time over its life, no files written, few descriptors, no core dumps.
func setLimits(pid int, addressSpace uint64, cpu time.Duration) error {
	secs := uint64(cpu.Seconds())
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_AS, addressSpace},
		{unix.RLIMIT_CPU, secs},
		{unix.RLIMIT_FSIZE, 0},
		{unix.RLIMIT_CORE, 0},
		{unix.RLIMIT_NOFILE, 32},
	}
	for _, l := range limits {
		rl := unix.Rlimit{Cur: l.val, Max: l.val}
		if err := unix.Prlimit(pid, l.res, &rl, nil); err != nil {
			return fmt.Errorf("sandbox: set limit %d on child %d: %w", l.res, pid, err)
		}
	}
	return nil
}

// addressSpace returns a process's virtual memory size (VmSize).
func addressSpace(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return statusKB(string(b), "VmSize:")
}

func statusKB(status, field string) (uint64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// limitCPU sets the child's own soft CPU limit to what it used so far plus
// this script's timeout and a second, so a script the parent failed to
// kill still ends (SIGXCPU, then the hard limit's SIGKILL).
func limitCPU(timeout time.Duration) {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_CPU, &rl) != nil {
		return
	}
	soft := uint64((cpuTime() + timeout + time.Second).Seconds()) + 1
	if soft < rl.Max {
		rl.Cur = soft
		_ = unix.Setrlimit(unix.RLIMIT_CPU, &rl)
	}
}

// cpuTime is the CPU time this process used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
