package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// codeRun is the part of a run this test reads.
type codeRun struct {
	Status string
	Error  string
	Steps  []struct {
		Name, Status, Error string
		Output              json.RawMessage
		Logs                []string
	}
}

// TestCodeStepsThroughFlowd runs CODE flows through real HTTP against a
// started flowd: a script's output and logs land in the run, and hostile
// scripts (an endless loop, endless allocation) fail their runs while
// flowd keeps serving and its own memory stays small.
func TestCodeStepsThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)

	good := createCodeFlow(t, p, key, `{"name": "verify", "engine": "FLOW_BUILDER", "steps": [
		{"name": "check", "type": "CODE", "timeout": "2s", "code":
			"const mac = hmacSHA256Hex('whsec', JSON.stringify(trigger.body));\nconsole.log('order', trigger.body.order, 'items', trigger.body.items.length);\nreturn {mac, total: trigger.body.items.reduce((s, i) => s + i.price, 0), flow: flow.name};"},
		{"name": "after", "type": "SET", "values": {"total": "{{ steps.check.total }}"}}]}`)
	loop := createCodeFlow(t, p, key, `{"name": "loop", "engine": "FLOW_BUILDER", "steps": [
		{"name": "spin", "type": "CODE", "timeout": "500ms", "code": "while (true) {}"}]}`)
	hog := createCodeFlow(t, p, key, `{"name": "hog", "engine": "FLOW_BUILDER", "steps": [
		{"name": "eat", "type": "CODE", "timeout": "10s", "code": "const a = []; for (;;) a.push('x'.repeat(1024) + a.length)"}]}`)

	body := `{"order": "o-1", "items": [{"price": 5}, {"price": 7}]}`
	r := fire(t, p, good, body)
	if r.Status != "SUCCEEDED" || len(r.Steps) != 2 {
		t.Fatalf("good run %s %q: %+v", r.Status, r.Error, r.Steps)
	}
	var out struct {
		Mac   string
		Total float64
		Flow  string
	}
	if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil || out.Total != 12 || out.Flow != "verify" || len(out.Mac) != 64 {
		t.Errorf("CODE output %s (%v)", r.Steps[0].Output, err)
	}
	if len(r.Steps[0].Logs) != 1 || r.Steps[0].Logs[0] != "order o-1 items 2" {
		t.Errorf("CODE logs %q", r.Steps[0].Logs)
	}
	if string(r.Steps[1].Output) != `{"total":12}` {
		t.Errorf("the next step read steps.check.total as %s", r.Steps[1].Output)
	}

	before := flowdRSS(t, p)
	for _, h := range []struct{ flow, want string }{
		{loop, "ran longer than its 500ms timeout"},
		{hog, "MiB of memory"},
	} {
		r := fire(t, p, h.flow, `{}`)
		if r.Status != "FAILED" || len(r.Steps) != 1 || r.Steps[0].Status != "FAILED" || !strings.Contains(r.Steps[0].Error, h.want) {
			t.Errorf("hostile run %s %q: step %+v, want FAILED with %q", r.Status, r.Error, r.Steps, h.want)
		}
		// flowd is unharmed: the good flow still runs.
		if r := fire(t, p, good, body); r.Status != "SUCCEEDED" {
			t.Errorf("after a hostile script the good flow ran %s %q", r.Status, r.Error)
		}
	}
	if after := flowdRSS(t, p); after > before+64<<20 {
		t.Errorf("flowd RSS grew from %d MiB to %d MiB across hostile scripts", before>>20, after>>20)
	}
}

func createCodeFlow(t *testing.T, p *proc, key, def string) string {
	t.Helper()
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", def, 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	return f.ID
}

// fire sends a webhook to a flow and waits for its run to finish.
func fire(t *testing.T, p *proc, flowID, body string) codeRun {
	t.Helper()
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flowID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var acc struct{ RunID string }
	err = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("webhook = %d %v", resp.StatusCode, err)
	}
	key := initialKey(t, p.dir)
	var r codeRun
	testwait.For(t, 30*time.Second, "run "+acc.RunID+" to finish", func() bool {
		api(t, p, key, "GET", fmt.Sprintf("/api/v1/flows/%s/runs/%s", flowID, acc.RunID), "", 200, &r)
		return r.Status != "RUNNING"
	})
	return r
}

// flowdRSS is the resident memory of the flowd process (not its children).
func flowdRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
