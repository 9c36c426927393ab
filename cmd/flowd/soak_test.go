package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSoak runs minutes of mixed load against a real flowd and reports
// errors and resident memory over time. It runs only when FLOWD_SOAK holds
// a duration (make soak sets it); it is not part of make test. Mixed load:
// accepted webhooks of both builders (small and 64 KiB bodies), hostile
// ones (deep, oversized, invalid, unauthenticated), management reads
// (flows, run lists, single runs), health checks and metrics scrapes. A
// 5xx, a transport error or resident memory at the end more than twice
// what it was after the first minute fails it.
func TestSoak(t *testing.T) {
	d := os.Getenv("FLOWD_SOAK")
	if d == "" {
		t.Skip("set FLOWD_SOAK to a duration, such as 2m (make soak)")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("FLOWD_SOAK=%q: %v", d, err)
	}
	clients := 8
	if v := os.Getenv("FLOWD_SOAK_CLIENTS"); v != "" {
		if clients, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn", "FLOWD_RATE_LIMIT=0", "FLOWD_MEMORY_LIMIT=256MiB")
	key := initialKey(t, dir)
	var fb, wf struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name":"soak","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"n":"{{ trigger.body.n }}"}},{"name":"f","type":"FILTER","condition":"trigger.body.n % 2 == 0"}]}`, 201, &fb)
	api(t, p, key, "POST", "/api/v1/flows/"+fb.ID+"/enable", "", 200, nil)
	api(t, p, key, "POST", "/api/v1/flows", `{"name":"soak-wf","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"ANY","path":"soak/in","responseMode":"ON_COMPLETION"}},"steps":[{"name":"r","type":"RESPOND","statusCode":200,"body":{"ok":"yes"}}]}`, 201, &wf)
	api(t, p, key, "POST", "/api/v1/flows/"+wf.ID+"/enable", "", 200, nil)

	large := `{"n":2,"blob":"` + strings.Repeat("x", 64<<10) + `"}`
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	oversized := `{"blob":"` + strings.Repeat("y", 11<<20) + `"}`
	type op struct {
		name, method, path, body string
		auth                     bool
		want                     int
	}
	ops := []op{
		{"webhook small", "POST", "/api/v1/webhooks/" + fb.ID, `{"n":1}`, false, 200},
		{"webhook small", "POST", "/api/v1/webhooks/" + fb.ID, `{"n":2}`, false, 200},
		{"webhook 64KiB", "POST", "/api/v1/webhooks/" + fb.ID, large, false, 200},
		{"workflow sync", "POST", "/webhook/soak/in", `{"a":1}`, false, 200},
		{"webhook deep", "POST", "/api/v1/webhooks/" + fb.ID, deep, false, 400},
		{"webhook invalid", "POST", "/api/v1/webhooks/" + fb.ID, `{"a":`, false, 400},
		{"webhook unknown", "POST", "/api/v1/webhooks/flw_nope", `{}`, false, 404},
		{"list flows", "GET", "/api/v1/flows", "", true, 200},
		{"list runs", "GET", "/api/v1/flows/" + fb.ID + "/runs?limit=100", "", true, 200},
		{"no key", "GET", "/api/v1/flows", "", false, 401},
		{"healthz", "GET", "/healthz", "", false, 200},
		{"metrics", "GET", "/metrics", "", false, 200},
	}
	client := &http.Client{Timeout: 60 * time.Second}
	var (
		requests, failures atomic.Int64
		mu                 sync.Mutex
		failed             = map[string]int{}
	)
	do := func(o op) {
		req, _ := http.NewRequest(o.method, p.base+o.path, strings.NewReader(o.body))
		if o.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if o.auth {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		requests.Add(1)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != o.want {
			failures.Add(1)
			why := "transport error"
			if err == nil {
				why = strconv.Itoa(resp.StatusCode)
			}
			mu.Lock()
			failed[o.name+": "+why]++
			mu.Unlock()
		}
	}
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for time.Now().Before(stop) {
				do(ops[r.IntN(len(ops))])
			}
		})
	}
	// The large-body phase: two senders of 10 MiB bodies, one JSON to the
	// flow builder webhook and one multipart upload to a workflow path,
	// each about once a second. Each is accepted (200) or, while the
	// budget of bodies in flight is full, 503 with Retry-After.
	var up struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name":"soak-up","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"soak/upload"}}}`, 201, &up)
	api(t, p, key, "POST", "/api/v1/flows/"+up.ID+"/enable", "", 200, nil)
	bigJSON := []byte(`{"n":1,"blob":"` + strings.Repeat("z", 10<<20-64) + `"}`)
	var multi bytes.Buffer
	mw := multipart.NewWriter(&multi)
	fw, _ := mw.CreateFormFile("file", "big.bin")
	fw.Write(bytes.Repeat([]byte{0xfe, 0x01}, (10<<20-4096)/2))
	mw.Close()
	sendLarge := func(name, path, ct string, body []byte) {
		requests.Add(1)
		resp, err := client.Post(p.base+path, ct, bytes.NewReader(body))
		ok := err == nil && (resp.StatusCode == 200 || resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if !ok {
			failures.Add(1)
			why := "transport error"
			if err == nil {
				why = strconv.Itoa(resp.StatusCode)
			}
			mu.Lock()
			failed[name+": "+why]++
			mu.Unlock()
		}
	}
	wg.Go(func() {
		for time.Now().Before(stop) {
			sendLarge("webhook 10 MiB JSON", "/api/v1/webhooks/"+fb.ID, "application/json", bigJSON)
			time.Sleep(time.Second) // the load's pace, on purpose: a soak is load over time, not an event
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			sendLarge("upload 10 MiB multipart", "/webhook/soak/upload", mw.FormDataContentType(), multi.Bytes())
			time.Sleep(time.Second) // the load's pace, on purpose
		}
	})
	// An oversized body now and then: refused at its declared length.
	wg.Go(func() {
		for time.Now().Before(stop) {
			do(op{"webhook 11 MiB", "POST", "/api/v1/webhooks/" + fb.ID, oversized, false, 413})
			time.Sleep(2 * time.Second) // the load's pace, on purpose
		}
	})

	type sample struct {
		at       time.Duration
		rssMB    float64
		requests int64
	}
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(10 * time.Second)
	for time.Now().Before(stop) {
		<-tick.C
		mb, _ := rss(p.cmd.Process.Pid)
		s := sample{at: time.Since(start).Round(time.Second), rssMB: mb, requests: requests.Load()}
		samples = append(samples, s)
		t.Logf("t=%-5v rss=%6.1f MB requests=%d failures=%d", s.at, s.rssMB, s.requests, failures.Load())
	}
	tick.Stop()
	wg.Wait()

	t.Logf("SOAK %v, %d clients: %d requests (%.0f/s), %d unexpected answers, peak RSS %.1f MB",
		dur, clients, requests.Load(), float64(requests.Load())/time.Since(start).Seconds(), failures.Load(), peakOr0(p.cmd.Process.Pid))
	for k, n := range failed {
		t.Logf("  unexpected: %s x%d", k, n)
	}
	if failures.Load() > 0 {
		t.Errorf("%d unexpected answers", failures.Load())
	}
	if status, body := get(t, p.base+"/healthz", ""); status != 200 {
		t.Errorf("healthz after the soak = %d %s", status, body)
	}
	// Flat memory: the last sample within twice the one after warm-up.
	if len(samples) >= 7 {
		warm, last := samples[5].rssMB, samples[len(samples)-1].rssMB
		if last > 2*warm {
			t.Errorf("resident memory grew from %.1f MB to %.1f MB", warm, last)
		}
	}
}

// rss reads a process's resident set size (VmRSS) in MB.
func rss(pid int) (float64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024, err == nil
		}
	}
	return 0, false
}

func peakOr0(pid int) float64 {
	mb, _ := peakRSS(pid)
	return mb
}
