package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// BenchmarkRunListPage answers a flow's run list, a page of 100 finished
// runs each with one step result: "decoded" as the API did before, the
// store decoding each run's summary and writeJSON encoding the runs;
// "stored" as it does now, from the summaries' stored JSON
// (Service.ListRunsJSON, writeJSONList); "GET" the whole request through
// the API's handler (authentication, routing, the page).
func BenchmarkRunListPage(b *testing.B) {
	ctx := context.Background()
	env := flowtest.New(b, flowtest.Options{})
	p, err := env.Svc.CreateProject(ctx, "bench", automation.PlanEnterprise)
	if err != nil {
		b.Fatal(err)
	}
	key, _, err := env.Svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		b.Fatal(err)
	}
	var in automation.FlowInput
	if err := json.Unmarshal([]byte(`{"name":"bench","engine":"FLOW_BUILDER",
		"steps":[{"name":"set","type":"SET","values":{"a":"b"}}]}`), &in); err != nil {
		b.Fatal(err)
	}
	f, err := env.Svc.CreateFlow(ctx, p, in)
	if err != nil {
		b.Fatal(err)
	}
	seedRuns(b, env, f, 1000)
	api := NewAPI(env.Svc, nil)
	pr := automation.PageRequest{Limit: "100"}
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := env.Svc.ListRuns(ctx, p, f.ID, pr)
			if err != nil {
				b.Fatal(err)
			}
			writeJSON(httptest.NewRecorder(), http.StatusOK, l)
		}
	})
	b.Run("stored", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := env.Svc.ListRunsJSON(ctx, p, f.ID, pr)
			if err != nil {
				b.Fatal(err)
			}
			writeJSONList(httptest.NewRecorder(), l)
		}
	})
	b.Run("GET", func(b *testing.B) {
		b.ReportAllocs()
		req := httptest.NewRequest("GET", "/api/v1/flows/"+f.ID+"/runs?limit=100", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		for b.Loop() {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), `{"data":[{`) {
				b.Fatalf("GET = %d %.200s", rec.Code, rec.Body)
			}
		}
	})
}

// seedRuns stores n finished runs of f straight through the store, from
// several goroutines so that they share commits, shaped as flowbench's:
// a small JSON trigger and one SET step.
func seedRuns(b *testing.B, env *flowtest.Env, f automation.Flow, n int) {
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				at := base.Add(time.Duration(i) * time.Millisecond)
				fin, d := at.Add(3*time.Millisecond), int64(3)
				r := automation.Run{
					ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID, Status: automation.RunSucceeded,
					Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
						Headers: map[string]string{"content-type": "application/json", "user-agent": "bench"},
						Query:   map[string]string{},
						Body:    json.RawMessage(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)},
					Steps: []automation.StepResult{{Name: "set", Type: automation.StepSet, Status: automation.StepSucceeded,
						Output: json.RawMessage(`{"a":"b"}`), StartedAt: &at, FinishedAt: &fin, DurationMs: 1, Attempts: 1}},
					Created: at, Started: &at, Finished: &fin, DurationMs: &d, Attempts: 1,
				}
				if err := env.Store.Enqueue(ctx, r); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
