package deploy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// recorder is an external service that keeps the path of every request
// and answers 422 on paths ending in /fail while failing is set.
type recorder struct {
	*httptest.Server
	mu      sync.Mutex
	paths   []string
	failing atomic.Bool
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.failing.Store(true)
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.paths = append(rec.paths, r.URL.Path)
		rec.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/fail") && rec.failing.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// take returns the paths requested since the last take.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.paths
	rec.paths = nil
	return out
}

// TestRunsPinnedOnLambda: through the api, webhook and runner functions on
// moto, a run waiting at a WAIT step (a delayed SQS message) while two
// versions are published resumes on the version it started on; a run
// that failed on version 1, retried from its failed step after version 2,
// runs version 1's step; the versions are listed and read back, a draft is
// saved and discarded, and deleting the flow removes them.
func TestRunsPinnedOnLambda(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 1})
	rec := newRecorder(t)
	steps := func(tag string) string {
		return fmt.Sprintf(`[{"name": "first", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/first", "body": {}},
			{"name": "pause", "type": "WAIT", "duration": "1s"},
			{"name": "second", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/second", "body": {}}]`, rec.URL, tag)
	}
	status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, `{"name": "pinned", "engine": "FLOW_BUILDER", "steps": `+steps("v1")+`}`)
	if status != 201 || f["version"] != 1.0 || f["hasDraft"] != false {
		t.Fatalf("create = %d %v", status, f)
	}
	id := f["id"].(string)
	if status, _ := call(t, e.api, "POST", "/api/v1/flows/"+id+"/enable", e.key, ""); status != 200 {
		t.Fatalf("enable = %d", status)
	}
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+id, "", `{}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID := acc["runId"].(string)
	testwait.For(t, 30*time.Second, "the run to wait at its WAIT step", func() bool {
		e.poll(t)
		_, r := call(t, e.api, "GET", "/api/v1/flows/"+id+"/runs/"+runID, e.key, "")
		return r["nextAttemptAt"] != nil
	})
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id, e.key, `{"steps": `+steps("v2")+`}`); status != 200 || g["version"] != 2.0 {
		t.Fatalf("PUT /api/v1/flows/{flowId} = %d %v, want version 2", status, g)
	}
	if status, d := call(t, e.api, "PUT", "/api/v1/flows/"+id+"/draft", e.key, `{"steps": `+steps("v3")+`}`); status != 200 || d["basedOn"] != 2.0 {
		t.Fatalf("save draft = %d %v", status, d)
	}
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id+"/publish", e.key, `{"message": "third"}`); status != 200 || g["version"] != 3.0 || g["hasDraft"] != false {
		t.Fatalf("publish = %d %v", status, g)
	}
	var r map[string]any
	testwait.For(t, 30*time.Second, "the waiting run to finish", func() bool {
		e.poll(t)
		_, r = call(t, e.api, "GET", "/api/v1/flows/"+id+"/runs/"+runID, e.key, "")
		return r["status"] != "RUNNING"
	})
	if r["status"] != "SUCCEEDED" || r["flowVersion"] != 1.0 {
		t.Fatalf("pinned run %v", r)
	}
	if got := strings.Join(rec.take(), " "); got != "/v1/first /v1/second" {
		t.Fatalf("the pinned run called %s; want version 1's steps", got)
	}

	// A failed run retried from its failed step, after a publish.
	failing := `[{"name": "a", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/a", "body": {}},
		{"name": "b", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/fail", "body": {}}]`
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id, e.key, `{"steps": `+fmt.Sprintf(failing, rec.URL, "v4")+`}`); status != 200 || g["version"] != 4.0 {
		t.Fatalf("publish version 4 = %d %v", status, g)
	}
	_, acc = call(t, e.hook, "POST", "/api/v1/webhooks/"+id, "", `{}`)
	failedID := acc["runId"].(string)
	testwait.For(t, 30*time.Second, "the run on version 4 to fail", func() bool {
		e.poll(t)
		_, r = call(t, e.api, "GET", "/api/v1/flows/"+id+"/runs/"+failedID, e.key, "")
		return r["status"] != "RUNNING"
	})
	if r["status"] != "FAILED" || r["flowVersion"] != 4.0 {
		t.Fatalf("run on version 4: %v", r)
	}
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id, e.key, `{"steps": `+fmt.Sprintf(failing, rec.URL, "v5")+`}`); status != 200 || g["version"] != 5.0 {
		t.Fatalf("publish version 5 = %d %v", status, g)
	}
	rec.failing.Store(false)
	rec.take()
	status, retried := call(t, e.api, "POST", "/api/v1/flows/"+id+"/runs/"+failedID+"/retry", e.key, `{"from": "FAILED_STEP"}`)
	if status != 201 || retried["flowVersion"] != 4.0 {
		t.Fatalf("retry from the failed step = %d %v", status, retried)
	}
	testwait.For(t, 30*time.Second, "the retry to finish", func() bool {
		e.poll(t)
		_, r = call(t, e.api, "GET", "/api/v1/flows/"+id+"/runs/"+retried["id"].(string), e.key, "")
		return r["status"] != "RUNNING"
	})
	if got := strings.Join(rec.take(), " "); r["status"] != "SUCCEEDED" || got != "/v4/fail" {
		t.Fatalf("retry from the failed step: %v, calls %s; want SUCCEEDED calling version 4's b alone", r["status"], got)
	}

	// History: newest first, paged; one version with its definition.
	status, page := call(t, e.api, "GET", "/api/v1/flows/"+id+"/versions?limit=2", e.key, "")
	data, _ := page["data"].([]any)
	if status != 200 || len(data) != 2 || data[0].(map[string]any)["version"] != 5.0 || page["hasMore"] != true {
		t.Fatalf("versions page = %d %v", status, page)
	}
	status, page = call(t, e.api, "GET", "/api/v1/flows/"+id+"/versions?limit=10&cursor="+page["cursor"].(string), e.key, "")
	if data, _ = page["data"].([]any); status != 200 || len(data) != 3 || data[2].(map[string]any)["version"] != 1.0 {
		t.Fatalf("second versions page = %d %v", status, page)
	}
	status, v3 := call(t, e.api, "GET", "/api/v1/flows/"+id+"/versions/3", e.key, "")
	if def, _ := v3["definition"].(map[string]any); status != 200 || v3["message"] != "third" || def == nil || !strings.Contains(fmt.Sprint(def["steps"]), "/v3/first") {
		t.Fatalf("version 3 = %d %v", status, v3)
	}
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id+"/versions/3/restore", e.key, ""); status != 200 || g["version"] != 6.0 {
		t.Fatalf("restore = %d %v", status, g)
	}
	if status, _ := call(t, e.api, "PUT", "/api/v1/flows/"+id+"/draft", e.key, `{"steps": []}`); status != 200 {
		t.Fatalf("save draft = %d", status)
	}
	if status, _ := call(t, e.api, "DELETE", "/api/v1/flows/"+id+"/draft", e.key, ""); status != 204 {
		t.Fatalf("discard draft = %d", status)
	}
	if status, body := call(t, e.api, "POST", "/api/v1/flows/"+id+"/publish", e.key, ""); status != 409 || !strings.Contains(fmt.Sprint(body), "DRAFT_NOT_FOUND") {
		t.Fatalf("publish without a draft = %d %v", status, body)
	}
	if status, _ := call(t, e.api, "DELETE", "/api/v1/flows/"+id, e.key, ""); status != 204 {
		t.Fatalf("delete = %d", status)
	}
	if n, err := e.store.FlowVersions(t.Context(), e.project.ID, id, automation.ListQuery{Limit: 10}); err != nil || len(n.Items) != 0 {
		t.Fatalf("versions left after the delete: %v %v", n.Items, err)
	}
	if _, err := e.store.FlowVersion(t.Context(), e.project.ID, id, 1); !automation.IsNotFound(err) {
		t.Fatalf("version 1 of a deleted flow: %v", err)
	}
}
