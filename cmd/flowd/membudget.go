package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"flowservice/pkg/httpapi"
	"flowservice/pkg/runworker"
)

// The memory budget (docs/reliability.md, "Memory") is what flowd sizes its
// runs under way and its webhook bodies in flight from. It comes from the
// tightest limit the process really has: a container's cgroup, the
// process's address-space rlimit, the runtime's soft limit, the machine's
// memory. Before, it was half the machine's memory whatever the container
// or rlimit allowed: under a 4 GiB RLIMIT_AS on a 24 GiB machine, flowd
// budgeted 12 GiB and was killed by 20 concurrent 10 MiB deliveries.

// memorySources are where the limits are read: the system in flowd
// (systemMemory), fakes in tests.
type memorySources struct {
	// ReadFile reads /proc/self/mountinfo, /proc/self/cgroup and cgroup
	// files.
	ReadFile func(name string) ([]byte, error)
	// RlimitAS is the soft RLIMIT_AS, unix.RLIM_INFINITY for none.
	RlimitAS func() (uint64, error)
	// GoMemLimit is the runtime's soft limit (debug.SetMemoryLimit(-1)),
	// math.MaxInt64 for none.
	GoMemLimit func() int64
	// TotalRAM is the machine's memory in bytes.
	TotalRAM func() (uint64, error)
	Getenv   func(string) string
}

// systemMemory reads the limits of this process.
func systemMemory(getenv func(string) string) memorySources {
	return memorySources{
		ReadFile: os.ReadFile,
		RlimitAS: func() (uint64, error) {
			var rl unix.Rlimit
			err := unix.Getrlimit(unix.RLIMIT_AS, &rl)
			return rl.Cur, err
		},
		GoMemLimit: func() int64 { return debug.SetMemoryLimit(-1) },
		TotalRAM: func() (uint64, error) {
			var si unix.Sysinfo_t
			if err := unix.Sysinfo(&si); err != nil {
				return 0, err
			}
			return uint64(si.Totalram) * uint64(si.Unit), nil
		},
		Getenv: getenv,
	}
}

// The sources of a memory budget, in the order a tie is decided.
const (
	sourceFlowd    = "FLOWD_MEMORY_LIMIT"
	sourceCgroupV2 = "cgroup v2 memory.max"
	sourceCgroupV1 = "cgroup v1 memory.limit_in_bytes"
	sourceRlimit   = "rlimit RLIMIT_AS"
	sourceGo       = "GOMEMLIMIT"
	sourceRAM      = "the machine's RAM"
	sourceDefault  = "default"
)

// memoryLimit is the limit the budget comes from and the budget.
type memoryLimit struct {
	Source string // one of the source* names
	Limit  int64  // the limit as read, in bytes
	Budget int64  // the memory budget, in bytes
}

// String is how the start-up log and flowd --help say it.
func (m memoryLimit) String() string {
	if m.Source == sourceFlowd || m.Source == sourceGo {
		return fmt.Sprintf("%s from %s (the runtime's soft limit)", mib(m.Budget), m.Source)
	}
	if m.Source == sourceDefault {
		return fmt.Sprintf("%s (no limit could be read)", mib(m.Budget))
	}
	return fmt.Sprintf("%s: half of %s (%s)", mib(m.Budget), mib(m.Limit), m.Source)
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// unlimited is where a limit stops being one: cgroup v1 writes "no limit"
// as a page-rounded MaxInt64.
const unlimited = 1 << 62

// decideMemory picks the tightest limit: the operator's soft limit
// (FLOWD_MEMORY_LIMIT, or GOMEMLIMIT, which wins over it as the runtime's
// own) is the budget itself; a hard limit (cgroup, RLIMIT_AS, the
// machine's memory) gives half of it, room for what the budgets do not
// count (the runtime, SQLite's cache, the Go heap's overhead; an address
// space also holds reserved, unused mappings). flowdLimit is
// FLOWD_MEMORY_LIMIT in bytes, 0 for none.
func decideMemory(src memorySources, flowdLimit int64) memoryLimit {
	var cands []memoryLimit
	hard := func(source string, limit int64) {
		if limit > 0 && limit < unlimited {
			cands = append(cands, memoryLimit{Source: source, Limit: limit, Budget: limit / 2})
		}
	}
	v2, v1 := cgroupLimits(src.ReadFile)
	hard(sourceCgroupV2, v2)
	hard(sourceCgroupV1, v1)
	if src.RlimitAS != nil {
		if l, err := src.RlimitAS(); err == nil && l != unix.RLIM_INFINITY && l < unlimited {
			hard(sourceRlimit, int64(l))
		}
	}
	goEnv := src.Getenv != nil && src.Getenv("GOMEMLIMIT") != ""
	switch {
	case flowdLimit > 0 && !goEnv:
		cands = append(cands, memoryLimit{Source: sourceFlowd, Limit: flowdLimit, Budget: flowdLimit})
	case src.GoMemLimit != nil:
		if l := src.GoMemLimit(); l > 0 && l < math.MaxInt64 {
			cands = append(cands, memoryLimit{Source: sourceGo, Limit: l, Budget: l})
		}
	}
	if src.TotalRAM != nil {
		if l, err := src.TotalRAM(); err == nil && l > 0 && l < unlimited {
			hard(sourceRAM, int64(l))
		}
	}
	best := memoryLimit{Source: sourceDefault, Limit: 4 << 30, Budget: 2 << 30}
	for i, c := range cands {
		if i == 0 || c.Budget < best.Budget {
			best = c
		}
	}
	return best
}

// cgroupLimits reads this process's memory limits in cgroup v2
// (memory.max) and v1 (memory.limit_in_bytes), 0 where there is none: the
// tightest of the process's cgroup and its ancestors within the mount, as
// the kernel enforces each of them.
func cgroupLimits(readFile func(string) ([]byte, error)) (v2, v1 int64) {
	if readFile == nil {
		return 0, 0
	}
	mounts, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return 0, 0
	}
	groups, err := readFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0
	}
	var v2Path, v1Path string
	haveV2, haveV1 := false, false
	sc := bufio.NewScanner(bytes.NewReader(groups))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path, haveV2 = parts[2], true
		case hasItem(parts[1], "memory"):
			v1Path, haveV1 = parts[2], true
		}
	}
	sc = bufio.NewScanner(bytes.NewReader(mounts))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		f := strings.Fields(sc.Text())
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(f) < sep+3 {
			continue
		}
		root, point, fstype, super := f[3], unescapeMount(f[4]), f[sep+1], f[sep+3]
		switch {
		case fstype == "cgroup2" && haveV2 && v2 == 0:
			v2 = walkCgroup(readFile, point, root, v2Path, "memory.max")
		case fstype == "cgroup" && haveV1 && v1 == 0 && hasItem(super, "memory"):
			v1 = walkCgroup(readFile, point, root, v1Path, "memory.limit_in_bytes")
		}
	}
	return v2, v1
}

// walkCgroup reads file in the cgroup at cgPath, mounted at point (whose
// root is root), and in each of its ancestors within the mount: the
// smallest limit, 0 for none. A cgroup path outside the mount's root (a
// container seeing the host's path) is read at the mount point itself.
func walkCgroup(readFile func(string) ([]byte, error), point, root, cgPath, file string) int64 {
	rel, ok := strings.CutPrefix(cgPath, root)
	if !ok || root != "/" && rel != "" && !strings.HasPrefix(rel, "/") {
		rel = "/"
	}
	rel = path.Clean("/" + rel)
	var least int64
	for {
		if b, err := readFile(path.Join(point, rel, file)); err == nil {
			s := strings.TrimSpace(string(b))
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && n < unlimited && (least == 0 || n < least) {
				least = n
			}
		}
		if rel == "/" {
			return least
		}
		rel = path.Dir(rel)
	}
}

func hasItem(list, item string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == item {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// runBytes is the worker pool's budget of run documents under way: an
// eighth of the memory budget (a run holds a few times its document while
// it executes), at least 16 MiB, at most runworker's default.
func runBytes(budget int64) int64 {
	return min(max(budget/8, 16<<20), runworker.DefaultMaxBytes)
}

// bodyBytes is the receivers' budget of webhook bodies in flight, in wire
// bytes: a quarter of the memory budget over what a body byte may cost
// (httpapi.BodyCost). At least one body of the largest size always fits.
func bodyBytes(budget int64) int64 {
	return budget / 4 / httpapi.BodyCost
}
