package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeMemory is a machine with the files, rlimit, runtime limit and RAM
// given; every other file is missing.
func fakeMemory(files map[string]string, rlimit uint64, goLimit int64, env map[string]string, ram uint64) memorySources {
	return memorySources{
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
		RlimitAS:   func() (uint64, error) { return rlimit, nil },
		GoMemLimit: func() int64 { return goLimit },
		TotalRAM:   func() (uint64, error) { return ram, nil },
		Getenv:     func(k string) string { return env[k] },
	}
}

const (
	gib  = int64(1) << 30
	inf  = unix.RLIM_INFINITY
	ram  = uint64(24) << 30
	noGo = math.MaxInt64
)

var (
	v2Mount     = "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	hybridMount = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

// TestMemoryBudgetSources: the budget comes from the tightest limit the
// process has (half of a hard one, all of a soft one), and says which.
func TestMemoryBudgetSources(t *testing.T) {
	for _, tt := range []struct {
		name       string
		src        memorySources
		flowd      int64
		wantSource string
		wantLimit  int64
	}{
		{"RAM only", fakeMemory(nil, inf, noGo, nil, ram), 0, sourceRAM, 24 * gib},
		{"cgroup v2, limit on the parent", fakeMemory(map[string]string{
			"/proc/self/mountinfo":                             v2Mount,
			"/proc/self/cgroup":                                "0::/user.slice/app.service\n",
			"/sys/fs/cgroup/user.slice/app.service/memory.max": "max\n",
			"/sys/fs/cgroup/user.slice/memory.max":             "1073741824\n",
		}, inf, noGo, nil, ram), 0, sourceCgroupV2, 1 * gib},
		{"cgroup v2 in a container (namespace root)", fakeMemory(map[string]string{
			"/proc/self/mountinfo":      "24 1 0:22 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			"/proc/self/cgroup":         "0::/docker/abc\n",
			"/sys/fs/cgroup/memory.max": "3221225472",
		}, inf, noGo, nil, ram), 0, sourceCgroupV2, 3 * gib},
		{"cgroup v1 (hybrid)", fakeMemory(map[string]string{
			"/proc/self/mountinfo": hybridMount,
			"/proc/self/cgroup":    "4:memory:/process_api/abc\n3:cpuset:/\n0::/\n",
			"/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "2147483648\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
		}, inf, noGo, nil, ram), 0, sourceCgroupV1, 2 * gib},
		{"cgroup v1 unlimited", fakeMemory(map[string]string{
			"/proc/self/mountinfo": hybridMount,
			"/proc/self/cgroup":    "4:memory:/process_api/abc\n0::/\n",
			"/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "9223372036854771712\n",
		}, inf, noGo, nil, ram), 0, sourceRAM, 24 * gib},
		{"RLIMIT_AS under RAM", fakeMemory(nil, 4<<30, noGo, nil, ram), 0, sourceRlimit, 4 * gib},
		{"RLIMIT_AS under FLOWD_MEMORY_LIMIT", fakeMemory(nil, 4<<30, noGo, nil, ram), 8 * gib, sourceRlimit, 4 * gib},
		{"FLOWD_MEMORY_LIMIT under RLIMIT_AS", fakeMemory(nil, 4<<30, 512<<20, nil, ram), 512 << 20, sourceFlowd, 512 << 20},
		{"GOMEMLIMIT wins over FLOWD_MEMORY_LIMIT", fakeMemory(nil, inf, 300<<20, map[string]string{"GOMEMLIMIT": "300MiB"}, ram), 1 * gib, sourceGo, 300 << 20},
		{"cgroup under RLIMIT_AS", fakeMemory(map[string]string{
			"/proc/self/mountinfo": v2Mount, "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "1073741824",
		}, 4<<30, noGo, nil, ram), 0, sourceCgroupV2, 1 * gib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := decideMemory(tt.src, tt.flowd)
			if m.Source != tt.wantSource || m.Limit != tt.wantLimit {
				t.Fatalf("decideMemory = %+v, want %s at %d", m, tt.wantSource, tt.wantLimit)
			}
			soft := m.Source == sourceFlowd || m.Source == sourceGo
			if soft && m.Budget != m.Limit || !soft && m.Budget != m.Limit/2 {
				t.Errorf("budget %d of a %s limit of %d: want all of a soft limit, half of a hard one", m.Budget, m.Source, m.Limit)
			}
			if s := m.String(); !strings.Contains(s, m.Source) || !strings.Contains(s, mib(m.Budget)) {
				t.Errorf("String() = %q, want the source and the budget", s)
			}
		})
	}
	broken := memorySources{
		ReadFile:   func(string) ([]byte, error) { return nil, errors.New("no /proc") },
		RlimitAS:   func() (uint64, error) { return 0, errors.New("no rlimit") },
		GoMemLimit: func() int64 { return noGo },
		TotalRAM:   func() (uint64, error) { return 0, errors.New("no sysinfo") },
	}
	if m := decideMemory(broken, 0); m.Source != sourceDefault || m.Budget != 2*gib {
		t.Errorf("nothing readable: %+v, want the 2 GiB default", m)
	}
	// The budgets built on it follow it down.
	if got := bodyBytes(2 * gib); got != 2*gib/4/16 {
		t.Errorf("bodyBytes(2 GiB) = %d", got)
	}
	if got := runBytes(64 << 20); got != 16<<20 {
		t.Errorf("runBytes(64 MiB) = %d, want the 16 MiB floor", got)
	}
}

// TestBudgetUnderRLIMITAS: flowd started under a 3 GiB address-space
// limit (ulimit -v, as a systemd LimitAS= or a container runtime sets it)
// budgets from that limit, not from the machine's memory, says so in its
// start-up log, and the budget leaves room under the cap. Before, it
// budgeted half of the machine's memory whatever the rlimit.
func TestBudgetUnderRLIMITAS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	const capKiB = 3 << 20 // 3 GiB
	if ram, err := systemMemory(nil).TotalRAM(); err != nil || ram < 8<<30 {
		t.Skipf("the machine's memory (%d) must be well over the cap for the cap to be the tightest", ram)
	}
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command("sh", "-c", "ulimit -v "+strconv.Itoa(capKiB)+" && exec \"$0\"", flowdBin)
	p := startFlowdCmd(t, cmd, dir)
	var line struct {
		Msg, Source   string
		Limit, Budget int64
	}
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, `"memory budget`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("memory budget log line %q: %v", l, err)
			}
			break
		}
	}
	if line.Source != sourceRlimit || !strings.Contains(line.Msg, "RLIMIT_AS") {
		t.Fatalf("start-up log says %+v, want the budget from RLIMIT_AS\nstderr:\n%s", line, p.stderr)
	}
	const capBytes = int64(capKiB) << 10
	if line.Limit != capBytes || line.Budget <= 0 || line.Budget > capBytes/2 {
		t.Errorf("limit %d, budget %d: want the cap %d and at most half of it", line.Limit, line.Budget, capBytes)
	}
	if status, _ := get(t, p.base+"/healthz", ""); status != 200 {
		t.Errorf("GET /healthz under the cap = %d", status)
	}
}
