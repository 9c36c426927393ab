package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// api calls the management API of p with key and decodes the answer into
// out (when not nil), failing the test unless the status is want.
func api(t testing.TB, p *proc, key, method, path, body string, want int, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

func initialKey(t testing.TB, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// TestKill9LosesNoAcceptedWebhook kills flowd with SIGKILL in the middle of
// a burst of webhooks from several clients, restarts it, and checks that
// every webhook answered 200 has exactly one run record and that it
// finished; then that finished runs are never executed again.
func TestKill9LosesNoAcceptedWebhook(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	// The external service the flow calls: counts calls per run.
	var mu sync.Mutex
	calls := map[string]int{}
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Run string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		// A service slow on purpose, so that the kill finds runs in their
		// call; no event can stand in for a slow peer.
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		calls[body.Run]++
		mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ext.Close()
	callsOf := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range calls {
			out[k] = v
		}
		return out
	}

	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=4", "FLOWD_RUN_TIMEOUT=10s", "FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)

	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "crash", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}"}}]}`, ext.URL),
		201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	// The burst: clients post until the kill; every 200 is a promise.
	var (
		accMu    sync.Mutex
		accepted []string
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second}
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"event":"burst","client":%d,"n":%d}`, c, i)
				resp, err := client.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", bytes.NewBufferString(body))
				if err != nil {
					continue // the server is gone: nothing was promised
				}
				var got struct{ RunID string }
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && err == nil && got.RunID != "" {
					accMu.Lock()
					accepted = append(accepted, got.RunID)
					accMu.Unlock()
				}
			}
		}()
	}
	// The kill comes after a count of promises, not after a time: a loaded
	// machine accepts them later, never fewer.
	testwait.Event(t, "150 accepted webhooks", func() bool {
		accMu.Lock()
		defer accMu.Unlock()
		return len(accepted) >= 150
	})
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup at all
		t.Fatal(err)
	}
	<-p.exited
	// Every client returns once its request in flight fails against the
	// dead process: after wg.Wait no 200 can still be on its way.
	close(stop)
	wg.Wait()
	if len(accepted) < 20 {
		t.Fatalf("only %d webhooks were accepted before the kill; the burst is too small to say anything", len(accepted))
	}
	beforeRestart := callsOf()
	t.Logf("accepted %d webhooks; %d runs had called out before the kill", len(accepted), len(beforeRestart))

	// Restart on the same directory: every accepted run must finish.
	p2 := startFlowd(t, dir, env...)
	type run struct {
		ID, Status string
		Attempts   int
	}
	all := func() map[string]run {
		t.Helper()
		out := map[string]run{}
		cursor := ""
		for {
			var page struct {
				Data    []run
				Cursor  *string
				HasMore bool
			}
			q := "?limit=100"
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			api(t, p2, key, "GET", "/api/v1/flows/"+flow.ID+"/runs"+q, "", 200, &page)
			for _, r := range page.Data {
				if _, dup := out[r.ID]; dup {
					t.Fatalf("run %s listed twice", r.ID)
				}
				out[r.ID] = r
			}
			if !page.HasMore {
				return out
			}
			cursor = *page.Cursor
		}
	}
	var runs map[string]run
	testwait.For(t, 60*time.Second, "every run to finish after the restart", func() bool {
		runs = all()
		for _, r := range runs {
			if r.Status == "RUNNING" {
				return false
			}
		}
		return true
	})
	seen := map[string]bool{}
	for _, id := range accepted {
		if seen[id] {
			t.Fatalf("run ID %s was answered twice", id)
		}
		seen[id] = true
		r, ok := runs[id]
		if !ok {
			t.Fatalf("webhook answered 200 with run %s, but there is no such run after the restart", id)
		}
		if r.Status != "SUCCEEDED" {
			t.Errorf("run %s is %s, want SUCCEEDED", id, r.Status)
		}
	}
	afterRecovery := callsOf()
	for id := range runs {
		if afterRecovery[id] == 0 {
			t.Errorf("run %s finished without calling the external service", id)
		}
	}
	t.Logf("%d runs in all (%d accepted, the rest committed but unanswered); %d calls repeated by recovery",
		len(runs), len(accepted), repeated(beforeRestart, afterRecovery))

	// Once finished, never again: another restart executes nothing.
	p2.stop(t)
	p3 := startFlowd(t, dir, env...)
	// The positive event the check follows: a run started after the
	// restart has finished and the queue is empty. Workers claim due
	// entries oldest first, so anything the restart would have executed
	// again was claimed before this run, and has called out by the time
	// the queue is drained.
	var sentinel struct{ RunID string }
	api(t, p3, "", "POST", "/api/v1/webhooks/"+flow.ID, `{"event":"sentinel"}`, 200, &sentinel)
	testwait.For(t, 30*time.Second, "the run started after the second restart to finish, and the queue to drain", func() bool {
		var r run
		api(t, p3, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+sentinel.RunID, "", 200, &r)
		return r.Status == "SUCCEEDED" && queueDepth(t, p3) == 0
	})
	again := callsOf()
	if again[sentinel.RunID] != 1 {
		t.Fatalf("the run started after the restart called out %d times, want 1", again[sentinel.RunID])
	}
	delete(again, sentinel.RunID)
	if !equalCounts(again, afterRecovery) {
		t.Fatalf("a restart executed finished runs again: %d calls before, %d after", total(afterRecovery), total(again))
	}
	p3.stop(t)
}

// queueDepth reads flowd_queue_depth from flowd's /metrics (open on
// loopback): runs queued or executing.
func queueDepth(t testing.TB, p *proc) int {
	t.Helper()
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flowd_queue_depth "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("flowd_queue_depth %q: %v", v, err)
			}
			return int(n)
		}
	}
	t.Fatalf("GET /metrics (%d) has no flowd_queue_depth", resp.StatusCode)
	return 0
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func repeated(before, after map[string]int) int {
	n := 0
	for id, c := range before {
		if after[id] > c {
			n++
		}
	}
	return n
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
