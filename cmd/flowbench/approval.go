package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// approvalRuns is how many parked runs the approval section decides, one
// after another.
const approvalRuns = 200

// benchApproval measures (k): the time from an APPROVAL's decision to the
// next step starting. A fresh flowd parks approvalRuns runs of a flow
// APPROVAL → HTTP POST to a loopback sink; each is then approved through
// the API, one at a time, and the figure is from just before the decision
// is sent until the sink receives that run's request (the decision's
// write, the wake-up of an idle worker, the claim, the resumed attempt's
// read of the decision, and the HTTP step's request).
func benchApproval(ctx context.Context, c config, r *report) error {
	var mu sync.Mutex
	arrived := map[string]chan time.Time{}
	arrival := func(run string) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := arrived[run]
		if !ok {
			ch = make(chan time.Time, 1)
			arrived[run] = ch
		}
		return ch
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sink := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		var body struct{ Run string }
		_ = json.NewDecoder(req.Body).Decode(&body)
		select {
		case arrival(body.Run) <- at:
		default: // a retry: the first arrival counts
		}
		w.Write(okBody)
	})}
	go func() { _ = sink.Serve(l) }()
	defer sink.Close()

	p, stop, err := startFreshFlowd(ctx, c, "approval", "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_RATE_LIMIT=0")
	if err != nil {
		return err
	}
	defer stop()
	flowID, err := p.createFlow(fmt.Sprintf(`{"name":"approve","engine":"FLOW_BUILDER","steps":[`+
		`{"name":"ok","type":"APPROVAL","title":"go?","timeout":"1h"},`+
		`{"name":"next","type":"HTTP","method":"POST","url":%q,"body":{"run":"{{ run.id }}"}}]}`, "http://"+l.Addr().String()))
	if err != nil {
		return err
	}
	ids := make([]string, approvalRuns)
	for i := range ids {
		var out struct{ RunID string }
		if err := p.apiHook(flowID, &out); err != nil {
			return err
		}
		ids[i] = out.RunID
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := p.pendingApprovals()
		if err != nil {
			return err
		}
		if n >= approvalRuns {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d runs parked on their approval after 2 minutes", n, approvalRuns)
		}
		time.Sleep(100 * time.Millisecond) // a harness poll, not a test's wait
	}
	var lat latencies
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		if err := p.api("POST", "/api/v1/runs/"+id+"/approvals/ok", `{"decision":"approve"}`, 200, nil); err != nil {
			return err
		}
		select {
		case at := <-arrival(id):
			lat = append(lat, at.Sub(t0))
		case <-time.After(30 * time.Second):
			return fmt.Errorf("run %s: the step after its decision did not start within 30 s", id)
		}
	}
	r.section("(k) From an APPROVAL's decision to the next step")
	r.para("A fresh flowd (default workers) parks %d runs of a flow `APPROVAL` → `HTTP` POST to a loopback sink. Each is then approved "+
		"through `POST /api/v1/runs/{runId}/approvals/ok`, one after another; the figure is from just before the decision is sent until the "+
		"sink receives that run's request: the decision's write (which makes the run due in the same commit), the idle worker's wake-up, "+
		"the claim, the resumed attempt reading the decision, and the HTTP step's request.", approvalRuns)
	r.code("go run ./cmd/flowbench -only approval -out /tmp/approval.md")
	r.table([]string{"figure", "value"}, [][]string{
		{"decision → next step p50 / p99", fmt.Sprintf("**%s / %s** (%d decisions)", ms(lat.pct(50)), ms(lat.pct(99)), len(lat))},
		{"max", ms(lat.pct(100))},
	})
	return nil
}

// apiHook starts a run of a flow builder flow through its webhook.
func (p *flowd) apiHook(flowID string, out any) error {
	resp, err := client.Post(p.base+"/api/v1/webhooks/"+flowID, "application/json", strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webhook of %s answered %d", flowID, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// pendingApprovals counts the project's pending approvals, every page.
func (p *flowd) pendingApprovals() (int, error) {
	n, cursor := 0, ""
	for {
		var page struct {
			Data    []json.RawMessage
			Cursor  *string
			HasMore bool
		}
		path := "/api/v1/approvals?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if err := p.api("GET", path, "", 200, &page); err != nil {
			return 0, err
		}
		n += len(page.Data)
		if !page.HasMore || page.Cursor == nil {
			return n, nil
		}
		cursor = *page.Cursor
	}
}
