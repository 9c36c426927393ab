package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/sqlitestore"
)

// The killer repros of docs/reliability.md, each against a real flowd
// under a memory cap the test sets: GOMEMLIMIT for the runtime, and an
// address-space limit (RLIMIT_AS) put on the started process as the
// sandbox puts one on its children, at its idle size plus the cap, so
// that going past the cap is an allocation failure, not a slow machine.

// startCapped starts flowd as startFlowd does, with GOMEMLIMIT=soft and
// RLIMIT_AS at its size once answering plus hard.
func startCapped(t *testing.T, dir string, soft, hard uint64, env ...string) *proc {
	t.Helper()
	env = append([]string{"GOMEMLIMIT=" + strconv.FormatUint(soft, 10), "MALLOC_ARENA_MAX=1"}, env...)
	p := startFlowd(t, dir, env...)
	idle := procStatus(t, p, "VmSize:")
	rl := unix.Rlimit{Cur: idle + hard, Max: idle + hard}
	if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_AS, &rl, nil); err != nil {
		t.Fatalf("limit flowd's address space: %v", err)
	}
	return p
}

// procStatus reads a size field of flowd's /proc status (VmSize, VmHWM,
// VmRSS) in bytes.
func procStatus(t *testing.T, p *proc, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read flowd's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", field, rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in flowd's status", field)
	return 0
}

// bytesWritten is what flowd has written to files so far (/proc io
// wchar: every write(2), the database's and its WAL's included).
func bytesWritten(t *testing.T, p *proc) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read flowd's io: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no wchar in flowd's io")
	return 0
}

// alive fails the test if flowd exited.
func alive(t *testing.T, p *proc) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("flowd died: %v\nstderr:\n%s", p.cmd.ProcessState, tail(p.stderr.String(), 4000))
	default:
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitFinal polls a run until it is final, while flowd lives, and returns
// its status and error. The looks are paced: each reads the whole run
// (megabytes), which would weigh on the memory and bytes the tests measure.
func waitFinal(t *testing.T, p *proc, key, flowID, runID string) (status, msg string) {
	t.Helper()
	var run struct{ Status, Error string }
	testwait.Paced(t, 250*time.Millisecond, "run "+runID+" to end", func() bool {
		alive(t, p)
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &run)
		return run.Status != "RUNNING"
	})
	return run.Status, run.Error
}

// webhookFlow creates and enables a flow with a webhook trigger.
func webhookFlow(t *testing.T, p *proc, key, definition string) string {
	t.Helper()
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", definition, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	return flow.ID
}

// deliver posts body to the flow's webhook and returns the run's ID.
func deliver(t *testing.T, p *proc, flowID, body string) string {
	t.Helper()
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flowID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %s", resp.Status)
	}
	var ack struct {
		RunID string `json:"runId"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil || ack.RunID == "" {
		t.Fatalf("webhook answer: %v %+v", err, ack)
	}
	return ack.RunID
}

// TestForEachJournalIsLinear: a FOR_EACH whose items each make an HTTP
// call (a step with side effects, journaled before the next) writes bytes
// linear in its items: 1,000 items write about four times what 250 write,
// not sixteen, and less than 40 times the bytes of their results. Before
// the journal appended, every item wrote the whole run again (250 items
// of 8 KB: 448 MB).
func TestForEachJournalIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("runs FOR_EACH loops of 250 and 1,000 items against a flowd process")
	}
	t.Parallel() // its own flowd and directory; bytes written are read from that process alone
	result := `{"pad":"` + strings.Repeat("x", 2000) + `"}`
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(result))
	}))
	defer svc.Close()
	dir := filepath.Join(t.TempDir(), "data")
	p := startCapped(t, dir, 256<<20, 1<<30, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_RUN_TIMEOUT=120s")
	key := initialKey(t, dir)
	flowID := webhookFlow(t, p, key, fmt.Sprintf(`{"name": "each item calls", "engine": "FLOW_BUILDER",
		"steps": [{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "concurrency": 10, "steps": [
			{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"i": "{{ index }}"}}]},
			{"name": "done", "type": "HTTP", "method": "POST", "url": %q}]}`, svc.URL, svc.URL))
	written := func(n int) uint64 {
		xs := make([]string, n)
		for i := range xs {
			xs[i] = strconv.Itoa(i)
		}
		before := bytesWritten(t, p)
		id := deliver(t, p, flowID, `{"xs": [`+strings.Join(xs, ",")+`]}`)
		if status, msg := waitFinal(t, p, key, flowID, id); status != "SUCCEEDED" {
			t.Fatalf("run of %d items: %s %s", n, status, msg)
		}
		return bytesWritten(t, p) - before
	}
	small, large := written(250), written(1000)
	t.Logf("bytes written: 250 items %d (%d per item), 1,000 items %d (%d per item)", small, small/250, large, large/1000)
	if large > 4*small*3/2 {
		t.Errorf("1,000 items wrote %d bytes, 250 items %d: more than 1.5 times linear", large, small)
	}
	if perItem := large / 1000; perItem > 40*uint64(len(result)) {
		t.Errorf("1,000 items wrote %d bytes per item, for results of %d bytes", perItem, len(result))
	}
	alive(t, p)
}

// TestLogFloodForEach: one webhook of a FOR_EACH over 250 items, 10 at
// once, of a CODE step that logs 100 lines of 2 KiB (51 MB of logs; it ran
// flowd out of memory at 250 items). Under a 256 MiB GOMEMLIMIT and 1 GiB
// of address space over its idle size, the run finishes within its 8 MiB
// output budget, flowd lives, and its peak resident memory stays under
// 400 MiB.
func TestLogFloodForEach(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 250 CODE steps in the sandbox of a flowd process")
	}
	t.Parallel() // its own flowd and directory; peak memory is read from that process alone
	dir := filepath.Join(t.TempDir(), "data")
	p := startCapped(t, dir, 256<<20, 1<<30, "FLOWD_LOG_LEVEL=warn", "FLOWD_RUN_TIMEOUT=120s")
	key := initialKey(t, dir)
	flowID := webhookFlow(t, p, key, `{"name": "log flood", "engine": "FLOW_BUILDER",
		"steps": [{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "concurrency": 10, "steps": [
			{"name": "noisy", "type": "CODE", "timeout": "10s",
			 "code": "for (let i = 0; i < 100; i++) console.log('x'.repeat(2048)); return {i: index}"}]}]}`)
	xs := make([]string, 250)
	for i := range xs {
		xs[i] = strconv.Itoa(i + 1)
	}
	id := deliver(t, p, flowID, `{"xs": [`+strings.Join(xs, ",")+`]}`)
	status, msg := waitFinal(t, p, key, flowID, id)
	if status != "SUCCEEDED" && !(status == "FAILED" && strings.Contains(msg, "budget")) {
		t.Fatalf("log flood run: %s %s; want SUCCEEDED, or FAILED with a budget error", status, msg)
	}
	var run struct {
		Steps []struct {
			Iterations []struct {
				// A list of lines, or, where the answer is over its
				// budget, the marker that stands for them (docs/api.md,
				// "Large answers").
				Steps []struct{ Logs json.RawMessage }
			}
		}
	}
	api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+id, "", 200, &run)
	logBytes := 0
	for _, it := range run.Steps[0].Iterations {
		var lines []string
		var cut struct{ Bytes int }
		switch raw := it.Steps[0].Logs; {
		case len(raw) == 0:
		case raw[0] == '[':
			if err := json.Unmarshal(raw, &lines); err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				logBytes += len(l)
			}
		default: // cut from this answer, kept in the run: its JSON size counts
			if err := json.Unmarshal(raw, &cut); err != nil || cut.Bytes == 0 {
				t.Fatalf("logs %.200s: neither lines nor a marker (%v)", raw, err)
			}
			logBytes += cut.Bytes
		}
	}
	// Each item past the budget keeps one line that says so.
	if logBytes > 8<<20+250*200 {
		t.Errorf("the run keeps %d bytes of logs, over its 8 MiB output budget", logBytes)
	}
	peak := procStatus(t, p, "VmHWM:")
	t.Logf("run %s; %d bytes of logs kept; flowd's peak resident memory %d MiB", status, logBytes, peak>>20)
	if peak > 400<<20 {
		t.Errorf("flowd's peak resident memory was %d MiB, over 400 MiB", peak>>20)
	}
	alive(t, p)
}

// TestRestartWithLargeDueRuns: 40 runs whose trigger bodies are 10 MiB
// each are due together when flowd starts (written into its database while
// it was down, as a kill leaves runs whose WAITs end at once), under a
// 512 MiB GOMEMLIMIT and 1.5 GiB of address space over its idle size. It
// comes up (claims are bounded by bytes, and the worker pool by the bytes
// of runs under way), works through all 40, and stays under 1 GiB
// resident. Before, one claim loaded up to 64 whole runs: 5 of 5 starts
// died about 4 s in, and the crash came before any attempt was counted.
func TestRestartWithLargeDueRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 40 runs of 10 MiB and starts a flowd process on them")
	}
	t.Parallel() // its own flowd and directory; the package's longest test, mostly waiting on the disk
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_LOG_LEVEL=warn", "FLOWD_RUN_TIMEOUT=60s"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	flowID := webhookFlow(t, p, key, `{"name": "large and late", "engine": "FLOW_BUILDER",
		"steps": [{"name": "check", "type": "SET", "values": {"n": "{{ trigger.body.n }}", "size": "{{ len(trigger.body.pad) }}"}}]}`)
	p.stop(t)

	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.FlowByID(ctx, flowID)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("p", 10<<20)
	const runs = 40
	now := time.Now().UTC()
	for i := range runs {
		body := fmt.Sprintf(`{"n": %d, "pad": %q}`, i, pad)
		if err := s.Enqueue(ctx, automation.Run{ID: automation.NewID("run_"), Project: f.Project, FlowID: f.ID,
			Status: automation.RunRunning, Created: now.Add(time.Duration(i) * time.Millisecond),
			Trigger: automation.TriggerData{Method: "POST", Body: json.RawMessage(body)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	p2 := startCapped(t, dir, 512<<20, 3<<29, env...)
	// Waits for progress, not for a total time: on a loaded machine the 40
	// runs take longer, but a run finishes every few seconds unless flowd
	// is stuck. The stall allowed is generous: at a load average of 25 on
	// 2 cores the first of the 40 took over 30 s (start, the first claims
	// of 10 MiB each); only a flowd that stopped working fails it.
	const stall = 3 * time.Minute
	done, progressed := 0, time.Now()
	testwait.For(t, 20*time.Minute, "every run to succeed", func() bool {
		alive(t, p2)
		var page struct {
			Data []struct{ ID, Status, Error string }
		}
		api(t, p2, key, "GET", "/api/v1/flows/"+flowID+"/runs?limit=100", "", 200, &page)
		n := 0
		for _, r := range page.Data {
			switch r.Status {
			case "SUCCEEDED":
				n++
			case "RUNNING":
			default:
				t.Fatalf("run %s ended %s: %s", r.ID, r.Status, r.Error)
			}
		}
		if n > done {
			done, progressed = n, time.Now()
		} else if time.Since(progressed) > stall {
			t.Fatalf("no run finished for %s: %d of %d succeeded", stall, done, len(page.Data))
		}
		return len(page.Data) == runs && done == runs
	})
	peak := procStatus(t, p2, "VmHWM:")
	t.Logf("flowd worked through %d runs of 10 MiB in %s; peak resident memory %d MiB",
		runs, time.Since(start).Round(time.Millisecond), peak>>20)
	if peak > 1<<30 {
		t.Errorf("peak resident memory %d MiB, over 1 GiB", peak>>20)
	}
}

// TestConcurrentLargeDeliveries: 40 deliveries of 10 MiB at once to one
// workflow path, half multipart uploads and half JSON, to a flowd under a
// 512 MiB GOMEMLIMIT and 1.5 GiB of address space over its idle size.
// Each gets 200, or 503 with Retry-After and the error envelope (the
// budget of bodies in flight is full); flowd lives and stays under 1 GiB
// resident. Before, 40 multipart uploads ran it out of memory in 2.6 s.
func TestConcurrentLargeDeliveries(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 400 MiB of webhook bodies to a flowd process")
	}
	t.Parallel() // its own flowd and directory; peak memory is read from that process alone
	dir := filepath.Join(t.TempDir(), "data")
	p := startCapped(t, dir, 512<<20, 3<<29, "FLOWD_LOG_LEVEL=warn", "FLOWD_RATE_LIMIT=0")
	key := initialKey(t, dir)
	webhookFlow(t, p, key, `{"name": "uploads", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "upload"}}}`)
	file := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, (10<<20-4096)/3)
	var multi bytes.Buffer
	mw := multipart.NewWriter(&multi)
	fw, err := mw.CreateFormFile("file", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(file)
	mw.WriteField("note", "a large upload")
	mw.Close()
	jsonBody := []byte(`{"pad": "` + strings.Repeat("j", 10<<20-4096) + `"}`)

	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		statuses      = map[int]int{}
		badBusyAnswer string
	)
	for i := range 40 {
		wg.Go(func() {
			body, ct := jsonBody, "application/json"
			if i%2 == 0 {
				body, ct = multi.Bytes(), mw.FormDataContentType()
			}
			resp, err := http.Post(p.base+"/webhook/upload", ct, bytes.NewReader(body))
			if err != nil {
				mu.Lock()
				statuses[0]++
				mu.Unlock()
				return
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusServiceUnavailable &&
				(resp.Header.Get("Retry-After") == "" || !strings.Contains(string(answer), `"BODY_BUDGET"`)) {
				badBusyAnswer = resp.Header.Get("Retry-After") + " " + string(answer)
			}
		})
	}
	wg.Wait()
	alive(t, p)
	peak := procStatus(t, p, "VmHWM:")
	t.Logf("answers by status %v; peak resident memory %d MiB", statuses, peak>>20)
	if statuses[200]+statuses[503] != 40 || statuses[200] == 0 {
		t.Errorf("answers by status %v; want 40 of 200 or 503, some 200 (0: no answer)", statuses)
	}
	if badBusyAnswer != "" {
		t.Errorf("a 503 without Retry-After or the BODY_BUDGET envelope: %.300s", badBusyAnswer)
	}
	if peak > 1<<30 {
		t.Errorf("peak resident memory %d MiB, over 1 GiB", peak>>20)
	}
}
