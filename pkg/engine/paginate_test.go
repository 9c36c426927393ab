package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
)

// pagedAPI serves items 0..total-1, size a page: /cursor answers
// {"data": [...], "next_cursor": "c<N>" or null} and takes ?cursor=;
// /links answers {"data": [...], "links": {"next": "/links?page=N" or null}}.
// It records each request's Idempotency-Key.
type pagedAPI struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

func newPagedAPI(t *testing.T, total, size int) *pagedAPI {
	a := &pagedAPI{}
	page := func(from int) []int {
		var out []int
		for i := from; i < min(from+size, total); i++ {
			out = append(out, i)
		}
		return out
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/cursor", func(w http.ResponseWriter, r *http.Request) {
		from := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			from, _ = strconv.Atoi(strings.TrimPrefix(c, "c"))
		}
		var next any
		if from+size < total {
			next = "c" + strconv.Itoa(from+size)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": page(from), "next_cursor": next})
	})
	mux.HandleFunc("/links", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("page"))
		var next any
		if (n+1)*size < total {
			next = "/links?page=" + strconv.Itoa(n+1)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": page(n * size), "links": map[string]any{"next": next}})
	})
	mux.HandleFunc("/stuck", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data": [1], "next": "same"}`)
	})
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *pagedAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

func TestPaginate(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		method    string
		paginate  automation.Paginate
		wantItems int
		wantPages int
	}{
		{"cursor in a query parameter", "/cursor", "GET",
			automation.Paginate{Next: "response.body.next_cursor", Param: "cursor", Items: "response.body.data", MaxPages: 10}, 23, 3},
		{"next URL, relative", "/links", "GET",
			automation.Paginate{Next: "response.body.links.next", Items: "response.body.data", MaxPages: 10}, 23, 3},
		{"maxPages stops the walk", "/cursor", "GET",
			automation.Paginate{Next: "response.body.next_cursor", Param: "cursor", Items: "response.body.data", MaxPages: 2}, 20, 2},
		{"a repeated cursor ends it", "/stuck", "GET",
			automation.Paginate{Next: "response.body.next", Param: "cursor", Items: "response.body.data", MaxPages: 10}, 2, 2},
		{"POST pages", "/cursor", "POST",
			automation.Paginate{Next: "response.body.next_cursor", Param: "cursor", Items: "response.body.data", MaxPages: 10}, 23, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newPagedAPI(t, 23, 10)
			e := newEngine(t, newCredentials(), true)
			p := tt.paginate
			f := flowOf(
				automation.Step{Name: "list", Type: automation.StepHTTP, Method: tt.method, URL: api.URL + tt.path, Paginate: &p},
				automation.Step{Name: "count", Type: automation.StepSet, Values: raw(`{"n": "{{ len(steps.list.items) }}"}`)},
			)
			r := e.Execute(context.Background(), f, runOf(`{}`)).Run
			if r.Status != automation.RunSucceeded {
				t.Fatalf("run %s: %s", r.Status, r.Error)
			}
			out := output(t, r, 0)
			items, _ := out["items"].([]any)
			if len(items) != tt.wantItems || out["pages"] != float64(tt.wantPages) {
				t.Fatalf("output %d items, pages %v; want %d items, %d pages", len(items), out["pages"], tt.wantItems, tt.wantPages)
			}
			if tt.path != "/stuck" {
				for i, v := range items {
					if v != float64(i) {
						t.Fatalf("item %d = %v: pages out of order or repeated", i, v)
					}
				}
			}
			if got := output(t, r, 1)["n"]; got != float64(tt.wantItems) {
				t.Errorf("a later step saw %v items", got)
			}
			keys := api.requests()
			if len(keys) != tt.wantPages {
				t.Fatalf("%d requests, want %d", len(keys), tt.wantPages)
			}
			if tt.method == "POST" {
				seen := map[string]bool{}
				for _, k := range keys {
					if k == "" || seen[k] {
						t.Fatalf("idempotency keys %q: each page needs its own", keys)
					}
					seen[k] = true
				}
			}
		})
	}
}

func TestPaginateFailures(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		paginate automation.Paginate
		maxRun   int64
		wantErr  string
	}{
		{"items is not a list", "/cursor",
			automation.Paginate{Next: "response.body.next_cursor", Param: "cursor", Items: "response.body.next_cursor", MaxPages: 5},
			0, "paginate.items on page 1 must give a list"},
		{"next is not a URL without param", "/cursor",
			automation.Paginate{Next: "response.body.next_cursor", Items: "response.body.data", MaxPages: 5},
			0, `paginate.next gave "c50", not an http or https URL`},
		{"past the run's output budget", "/cursor",
			automation.Paginate{Next: "response.body.next_cursor", Param: "cursor", Items: "response.body.data", MaxPages: 100},
			600, "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newPagedAPI(t, 1000, 50)
			e := New(Config{Env: automation.ExecEnv{Credentials: newCredentials()}, AllowPrivateNetworks: true, MaxRunOutputBytes: tt.maxRun})
			p := tt.paginate
			f := flowOf(automation.Step{Name: "list", Type: automation.StepHTTP, URL: api.URL + tt.path, Paginate: &p})
			res := e.Execute(context.Background(), f, runOf(`{}`))
			if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Steps[0].Error, tt.wantErr) {
				t.Fatalf("run %s retryable=%v step error %q; want FAILED for good with %q", res.Run.Status, res.Retryable, res.Run.Steps[0].Error, tt.wantErr)
			}
		})
	}
}
