package httpapi

import (
	"context"
	"encoding/json"
	"testing"

	"flowservice/pkg/automation"
)

// TestRunSearchRetryReplay drives the run model's endpoints over HTTP,
// every exchange validated against the OpenAPI document: the project-wide
// search, retry with and without a body, and replay, with their 4xx.
func TestRunSearchRetryReplay(t *testing.T) {
	srv, key := newTestServer(t)
	var f automation.Flow
	call(t, srv, "POST", "/api/v1/flows", key, `{"name":"runs","engine":"FLOW_BUILDER",
		"steps":[{"name":"set","type":"SET","values":{"a":"b"}}]}`).into(t, 201, &f)
	full, err := srv.svc.Flow(context.Background(), projectOfKey(t, srv, key), f.ID)
	if err != nil {
		t.Fatal(err)
	}
	var started []automation.Run
	for range 3 {
		r, err := srv.svc.StartRun(context.Background(), full, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
			Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, r)
	}

	var page struct {
		Data    []automation.Run
		HasMore bool
		Cursor  *string
	}
	call(t, srv, "GET", "/api/v1/runs?flowId="+f.ID+"&status=RUNNING&limit=2", key, "").into(t, 200, &page)
	if len(page.Data) != 2 || !page.HasMore || page.Data[0].ID != started[2].ID {
		t.Fatalf("first page = %d runs (hasMore %v), want the 2 newest", len(page.Data), page.HasMore)
	}
	call(t, srv, "GET", "/api/v1/runs?cursor="+*page.Cursor+"&flowId="+f.ID+"&status=RUNNING&limit=2", key, "").into(t, 200, &page)
	if len(page.Data) != 1 || page.HasMore || page.Data[0].ID != started[0].ID {
		t.Fatalf("second page = %d runs, want the oldest", len(page.Data))
	}
	call(t, srv, "GET", "/api/v1/runs?since=yesterday", key, "").wantError(t, 400, "INVALID_PARAMETER")
	call(t, srv, "GET", "/api/v1/runs?status=DONE", key, "").wantError(t, 400, "INVALID_PARAMETER")

	retry := "/api/v1/flows/" + f.ID + "/runs/" + started[0].ID + "/retry"
	var again automation.Run
	call(t, srv, "POST", retry, key, "").into(t, 201, &again)
	if again.ID == started[0].ID || again.Status != automation.RunRunning {
		t.Fatalf("retry without a body = %+v", again)
	}
	call(t, srv, "POST", retry, key, `{"from":"START","trigger":{"body":{"n":2}}}`).into(t, 201, &again)
	call(t, srv, "POST", retry, key, `{"from":"MIDDLE"}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, srv, "POST", retry, key, `{"from":"FAILED_STEP","trigger":{"body":{}}}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, srv, "POST", retry, key, `{"from":"FAILED_STEP"}`).wantError(t, 409, "RUN_NOT_FAILED")

	var replayed automation.Replayed
	call(t, srv, "POST", "/api/v1/runs/replay", key, `{"status":"FAILED","flowId":"`+f.ID+`"}`).into(t, 200, &replayed)
	if replayed.Replayed != 0 {
		t.Fatalf("replayed %d runs of a flow without failures", replayed.Replayed)
	}
	call(t, srv, "POST", "/api/v1/runs/replay", key, `{"status":"DONE"}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, srv, "POST", "/api/v1/runs/replay", key, `{"status":"FAILED","flowId":"flw_missing"}`).wantError(t, 404, "FLOW_NOT_FOUND")
}

// projectOfKey finds the project a key belongs to.
func projectOfKey(t *testing.T, srv *testServer, key string) automation.Project {
	t.Helper()
	p, err := srv.svc.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
