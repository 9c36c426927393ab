package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/respbudget"
)

// TestRunListBytes: the run list and the run search answer exactly the
// bytes writeJSON writes for the pages of decoded runs (the encoding
// before the pages were written from the stored summaries), through
// cursors, a status filter, a creation window, runs with attempts counted
// since their document was written, and text that JSON escapes.
func TestRunListBytes(t *testing.T) {
	srv, key := newTestServer(t)
	ctx := context.Background()
	var f automation.Flow
	call(t, srv, "POST", "/api/v1/flows", key, `{"name":"bytes","engine":"FLOW_BUILDER",
		"steps":[{"name":"set","type":"SET","values":{"a":"b"}}]}`).into(t, 201, &f)
	p := projectOfKey(t, srv, key)
	full, err := srv.svc.Flow(ctx, p, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		td := automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
			Headers: map[string]string{"x-note": `<a href="x">&` + "\u2028"}, Query: map[string]string{"attempts": "3"},
			Body: json.RawMessage(`{"n":1}`)}
		if i == 2 {
			td.Headers["x-raw"] = "\xff\xfe" // not UTF-8
		}
		r, err := srv.svc.StartRun(ctx, full, td)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if _, err := srv.runs.store.ClaimRun(ctx, p.ID, r.ID, time.Now(), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	compare := func(path string, old func() (any, error)) *string {
		t.Helper()
		got := call(t, srv, "GET", path, key, "")
		v, err := old()
		if err != nil {
			t.Fatal(err)
		}
		want := httptest.NewRecorder()
		writeJSON(want, 200, v)
		// The answer budget (parts.go) writes <, > and & as themselves.
		if got.status != 200 || got.body == nil || string(got.body) != string(respbudget.UnescapeHTML(want.Body.Bytes())) {
			t.Fatalf("GET %s = %d\n%s\nwant\n%s", path, got.status, got.body, want.Body.String())
		}
		if ct := got.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		var page struct{ Cursor *string }
		if err := json.Unmarshal(got.body, &page); err != nil {
			t.Fatal(err)
		}
		return page.Cursor
	}
	pr := automation.PageRequest{Limit: "2"}
	for {
		path := "/api/v1/flows/" + f.ID + "/runs?limit=2"
		if pr.Cursor != "" {
			path += "&cursor=" + pr.Cursor
		}
		c := compare(path, func() (any, error) { return srv.svc.ListRuns(ctx, p, f.ID, pr) })
		if c == nil {
			break
		}
		pr.Cursor = *c
	}
	compare("/api/v1/flows/"+f.ID+"/runs?status=FAILED", func() (any, error) {
		return srv.svc.ListRuns(ctx, p, f.ID, automation.PageRequest{Status: "FAILED"})
	})
	search := automation.RunSearch{PageRequest: automation.PageRequest{Limit: "3"}}
	for {
		path := "/api/v1/runs?limit=3"
		if search.Cursor != "" {
			path += "&cursor=" + search.Cursor
		}
		c := compare(path, func() (any, error) { return srv.svc.SearchRuns(ctx, p, search) })
		if c == nil {
			break
		}
		search.Cursor = *c
	}
	since, until := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	compare("/api/v1/runs?flowId="+f.ID+"&status=RUNNING&since="+since+"&until="+until, func() (any, error) {
		return srv.svc.SearchRuns(ctx, p, automation.RunSearch{PageRequest: automation.PageRequest{Status: "RUNNING"},
			FlowID: f.ID, Since: since, Until: until})
	})
}
