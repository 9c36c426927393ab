package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// fakeCredentials stands in for *automation.Service, whose real form needs a
// store; its errors copy the Service's.
type fakeCredentials struct {
	mu      sync.Mutex
	conns   map[string]automation.Connection
	values  map[string]automation.ConnectionValue
	changes []automation.ConnectionStatus
}

func newCredentials() *fakeCredentials {
	return &fakeCredentials{conns: map[string]automation.Connection{}, values: map[string]automation.ConnectionValue{}}
}

func (f *fakeCredentials) add(id, key, header string, prefix *string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[id] = automation.Connection{ID: id, Project: "p1", Name: "conn " + id, Type: automation.ConnectionAPIKey, Status: automation.ConnectionActive}
	f.values[id] = automation.ConnectionValue{APIKey: automation.Secret(key), Header: header, Prefix: prefix}
}

func (f *fakeCredentials) status(id string) automation.ConnectionStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conns[id].Status
}

func (f *fakeCredentials) ConnectionCredential(_ context.Context, project, id string) (automation.Connection, automation.ConnectionValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.conns[id]
	if !ok || c.Project != project {
		return automation.Connection{}, automation.ConnectionValue{}, &automation.Error{Kind: automation.ErrNotFound,
			Code: "CONNECTION_NOT_FOUND", Message: "connection " + id + " was deleted or does not exist"}
	}
	if c.Status == automation.ConnectionExpired || c.Status == automation.ConnectionRevoked {
		return c, automation.ConnectionValue{}, &automation.Error{Kind: automation.ErrConflict, Code: "CONNECTION_" + string(c.Status),
			Message: "connection " + id + " (" + c.Name + ") is " + string(c.Status) + ": re-authorize it"}
	}
	return c, f.values[id], nil
}

func (f *fakeCredentials) SetConnectionStatus(_ context.Context, project, id string, s automation.ConnectionStatus) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.conns[id]
	if !ok {
		return automation.NotFound("connection", id)
	}
	c.Status = s
	f.conns[id] = c
	f.changes = append(f.changes, s)
	return nil
}

// external is a fake external service on 127.0.0.1.
type external struct {
	*httptest.Server
	hits    atomic.Int64
	accepts atomic.Int64
	accept  atomic.Bool // /guarded answers 200 instead of 401
	mu      sync.Mutex
	lastHdr http.Header
}

func newExternal(t *testing.T) *external {
	x := &external{}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "headers": r.Header, "body": string(b), "query": r.URL.Query(),
		})
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"code":%d}`, code)
	})
	mux.HandleFunc("/guarded", func(w http.ResponseWriter, r *http.Request) {
		if !x.accept.Load() {
			http.Error(w, "bad key "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n <= 0 {
			http.Redirect(w, r, "/echo", http.StatusFound)
			return
		}
		http.Redirect(w, r, "/redirect/"+strconv.Itoa(n-1), http.StatusFound)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("url"), http.StatusFound)
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.hits.Add(1)
		x.mu.Lock()
		x.lastHdr = r.Header.Clone()
		x.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			x.accepts.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	x.Server = srv
	return x
}

func (x *external) header() http.Header {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastHdr
}

func newEngine(t testing.TB, creds automation.Credentials, allowPrivate bool) *Engine {
	t.Helper()
	env := automation.ExecEnv{Credentials: creds}
	if n, ok := creds.(automation.ConnectionNames); ok {
		env.ConnectionNames = n // the test doubles that resolve names
	}
	return New(Config{Env: env, AllowPrivateNetworks: allowPrivate, MaxResponseBytes: 64 << 10})
}

func flowOf(steps ...automation.Step) automation.Flow {
	return automation.Flow{ID: "flw_1", Project: "p1", Name: "test flow", Steps: steps}
}

func runOf(body string) automation.Run {
	return automation.Run{ID: "run_1", FlowID: "flw_1", Status: automation.RunRunning, Trigger: automation.TriggerData{
		Method: "POST", Path: "/hook", Headers: map[string]string{"Content-Type": "application/json"},
		Query: map[string]string{}, Body: json.RawMessage(body),
	}}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// output decodes a step's recorded output.
func output(t *testing.T, r automation.Run, i int) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Steps[i].Output, &m); err != nil {
		t.Fatalf("step %d output %s: %v", i, r.Steps[i].Output, err)
	}
	return m
}

func statuses(r automation.Run) string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, string(st.Status))
	}
	return strings.Join(s, ",")
}

func TestHTTPConnectionInjectsKeyAndMasksIt(t *testing.T) {
	const key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	empty, token := "", "Token "
	tests := []struct {
		name           string
		header         string
		prefix         *string
		wantHeader     string
		wantValue      string
		wantNoAuthSent bool
	}{
		{"default bearer", "", nil, "Authorization", "Bearer " + key, false},
		{"custom header without prefix", "X-Api-Key", &empty, "X-Api-Key", key, true},
		{"custom prefix", "", &token, "Authorization", "Token " + key, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ext := newExternal(t)
			creds := newCredentials()
			creds.add("con_1", key, tt.header, tt.prefix)
			e := newEngine(t, creds, true)
			f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, ConnectionID: "con_1",
				URL:     ext.URL + "/echo",
				Headers: map[string]string{"X-Event": "{{ trigger.body.event }}"},
				Query:   automation.Query{Params: map[string]string{"ref": "{{ trigger.body.ref }}"}},
				Body:    raw(`{"text": "echo {{ trigger.body.event }}"}`)})
			res := e.Execute(context.Background(), f, runOf(`{"event":"push","ref":"main"}`))
			r := res.Run
			if r.Status != automation.RunSucceeded {
				t.Fatalf("run %s: %s", r.Status, r.Error)
			}
			h := ext.header()
			if got := h.Get(tt.wantHeader); got != tt.wantValue {
				t.Errorf("service saw %s = %q, want %q", tt.wantHeader, got, tt.wantValue)
			}
			if tt.wantNoAuthSent && h.Get("Authorization") != "" {
				t.Errorf("Authorization sent although the key goes in %s", tt.header)
			}
			if h.Get("X-Event") != "push" {
				t.Errorf("templated header X-Event = %q", h.Get("X-Event"))
			}
			out := output(t, r, 0)
			echo := out["body"].(map[string]any)
			if echo["method"] != "POST" || echo["body"] != `{"text":"echo push"}` {
				t.Errorf("echo = %v", echo)
			}
			if q := echo["query"].(map[string]any)["ref"]; fmt.Sprint(q) != "[main]" {
				t.Errorf("query ref = %v", q)
			}
			all, _ := json.Marshal(r)
			if strings.Contains(string(all), key) {
				t.Fatalf("the key leaked into the run: %s", all)
			}
			if !strings.Contains(string(all), automation.SecretMask) {
				t.Fatalf("the echoed key was not masked: %s", all)
			}
			if r.Response == nil || r.Response.StatusCode != 200 || !strings.Contains(string(r.Response.Body), `"status":200`) {
				t.Errorf("default response = %+v", r.Response)
			}
		})
	}
}

func TestHTTPStatusOutcomes(t *testing.T) {
	tests := []struct {
		code          int
		continueOn    bool
		wantRun       automation.RunStatus
		wantRetryable bool
		wantSteps     string
	}{
		{404, false, automation.RunFailed, false, "FAILED,SKIPPED"},
		{400, false, automation.RunFailed, false, "FAILED,SKIPPED"},
		{429, false, automation.RunFailed, true, "FAILED,SKIPPED"},
		{500, false, automation.RunFailed, true, "FAILED,SKIPPED"},
		{503, false, automation.RunFailed, true, "FAILED,SKIPPED"},
		{404, true, automation.RunSucceeded, false, "FAILED,SUCCEEDED"},
		{500, true, automation.RunSucceeded, false, "FAILED,SUCCEEDED"},
		{201, false, automation.RunSucceeded, false, "SUCCEEDED,SUCCEEDED"},
	}
	ext := newExternal(t)
	e := newEngine(t, newCredentials(), true)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d continue=%v", tt.code, tt.continueOn), func(t *testing.T) {
			f := flowOf(
				automation.Step{Name: "call", Type: automation.StepHTTP, URL: ext.URL + "/status/" + strconv.Itoa(tt.code), ContinueOnFail: tt.continueOn},
				automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"seen": "{{ steps.call.status }}"}`)},
			)
			res := e.Execute(context.Background(), f, runOf(`{}`))
			r := res.Run
			if r.Status != tt.wantRun || res.Retryable != tt.wantRetryable || statuses(r) != tt.wantSteps {
				t.Fatalf("run %s retryable=%v steps=%s error=%q; want %s %v %s",
					r.Status, res.Retryable, statuses(r), r.Error, tt.wantRun, tt.wantRetryable, tt.wantSteps)
			}
			if got := output(t, r, 0)["status"]; got != float64(tt.code) {
				t.Errorf("call output status = %v", got)
			}
			if tt.code >= 300 {
				want := fmt.Sprintf("answered %d %s", tt.code, http.StatusText(tt.code))
				if !strings.Contains(r.Steps[0].Error, want) {
					t.Errorf("step error %q, want %q", r.Steps[0].Error, want)
				}
			}
			if r.Status == automation.RunFailed {
				if !strings.HasPrefix(r.Error, "step call: GET "+ext.URL+"/status/") || r.Response != nil {
					t.Errorf("run error %q response %+v", r.Error, r.Response)
				}
			} else if got := output(t, r, 1)["seen"]; got != float64(tt.code) {
				t.Errorf("next step saw status %v", got)
			}
		})
	}
}

func TestConnectionStateFollowsAnswers(t *testing.T) {
	const key = "key-for-guarded-0123456789"
	ext := newExternal(t)
	creds := newCredentials()
	creds.add("con_1", key, "", nil)
	e := newEngine(t, creds, true)
	f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, ConnectionID: "con_1", URL: ext.URL + "/guarded"})

	r := e.Execute(context.Background(), f, runOf(`{}`)).Run
	if r.Status != automation.RunFailed || creds.status("con_1") != automation.ConnectionError {
		t.Fatalf("after 401: run %s, connection %s; want FAILED, ERROR", r.Status, creds.status("con_1"))
	}
	if !strings.Contains(r.Error, "answered 401") || !strings.Contains(r.Error, "con_1") {
		t.Errorf("run error %q should give the status and name the connection", r.Error)
	}
	// The service put the key in its error text: it must not reach the run.
	if all, _ := json.Marshal(r); strings.Contains(string(all), key) {
		t.Fatalf("the key leaked: %s", all)
	}

	ext.accept.Store(true)
	r = e.Execute(context.Background(), f, runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded || creds.status("con_1") != automation.ConnectionActive {
		t.Fatalf("after 200: run %s (%s), connection %s; want SUCCEEDED, ACTIVE", r.Status, r.Error, creds.status("con_1"))
	}
	// A healthy connection is not written on every success.
	r = e.Execute(context.Background(), f, runOf(`{}`)).Run
	if got := fmt.Sprint(creds.changes); got != "[ERROR ACTIVE]" {
		t.Errorf("status changes = %s, want [ERROR ACTIVE]", got)
	}
}

func TestUnusableConnectionFailsNamingIt(t *testing.T) {
	ext := newExternal(t)
	creds := newCredentials()
	creds.add("con_old", "k-expired-000000", "", nil)
	creds.conns["con_old"] = automation.Connection{ID: "con_old", Project: "p1", Name: "Slack", Status: automation.ConnectionExpired}
	e := newEngine(t, creds, true)
	tests := []struct{ id, want string }{
		{"con_gone", "step call: connection con_gone was deleted or does not exist"},
		{"con_old", "step call: connection con_old (Slack) is EXPIRED: re-authorize it"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			f := flowOf(
				automation.Step{Name: "call", Type: automation.StepHTTP, ConnectionID: tt.id, URL: ext.URL + "/echo"},
				automation.Step{Name: "next", Type: automation.StepSet},
			)
			res := e.Execute(context.Background(), f, runOf(`{}`))
			if res.Run.Status != automation.RunFailed || res.Run.Error != tt.want || res.Retryable {
				t.Fatalf("run %s %q retryable=%v; want FAILED %q, not retryable", res.Run.Status, res.Run.Error, res.Retryable, tt.want)
			}
			if statuses(res.Run) != "FAILED,SKIPPED" {
				t.Errorf("steps %s", statuses(res.Run))
			}
		})
	}
	if n := ext.hits.Load(); n != 0 {
		t.Fatalf("the service got %d requests without a usable connection", n)
	}
}

func TestFilter(t *testing.T) {
	ext := newExternal(t)
	e := newEngine(t, newCredentials(), true)
	steps := []automation.Step{
		{Name: "check", Type: automation.StepFilter, Condition: "trigger.body.event == 'push'"},
		{Name: "call", Type: automation.StepHTTP, URL: ext.URL + "/echo"},
		{Name: "reply", Type: automation.StepRespond, Body: raw(`{"status": "sent"}`)},
	}
	tests := []struct {
		body, wantSteps string
		wantRun         automation.RunStatus
		wantHits        int64
	}{
		{`{"event":"ping"}`, "SUCCEEDED,SKIPPED,SKIPPED", automation.RunSucceeded, 0},
		{`{"event":"push"}`, "SUCCEEDED,SUCCEEDED,SUCCEEDED", automation.RunSucceeded, 1},
		{`{}`, "SUCCEEDED,SKIPPED,SKIPPED", automation.RunSucceeded, 0},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			before := ext.hits.Load()
			r := e.Execute(context.Background(), flowOf(steps...), runOf(tt.body)).Run
			if r.Status != tt.wantRun || statuses(r) != tt.wantSteps || r.Error != "" {
				t.Fatalf("run %s steps %s error %q; want %s %s", r.Status, statuses(r), r.Error, tt.wantRun, tt.wantSteps)
			}
			if got := ext.hits.Load() - before; got != tt.wantHits {
				t.Errorf("service got %d requests, want %d", got, tt.wantHits)
			}
		})
	}

	r := e.Execute(context.Background(), flowOf(automation.Step{Name: "check", Type: automation.StepFilter, Condition: "trigger.body.event"}), runOf(`{"event":"push"}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "step check: condition \"trigger.body.event\" must be true or false") {
		t.Errorf("non-bool condition: %s %q", r.Status, r.Error)
	}
}

func TestSetTemplatesFeedLaterSteps(t *testing.T) {
	ext := newExternal(t)
	e := newEngine(t, newCredentials(), true)
	f := flowOf(
		automation.Step{Name: "set1", Type: automation.StepSet, Values: raw(`{"x": "{{ trigger.body.n * 2 }}", "greet": "hi {{ trigger.body.name }}", "data": "{{ trigger.body.data }}", "fixed": 7}`)},
		automation.Step{Name: "notify", Type: automation.StepHTTP, Method: "put", URL: ext.URL + "/echo?src={{ flow.id }}",
			Body: raw(`{"x": "{{ steps.set1.x }}", "who": "{{ steps.set1.greet }}", "ref": "{{ steps.set1.data.ref }}"}`)},
		automation.Step{Name: "reply", Type: automation.StepRespond, StatusCode: 201,
			Body: raw(`{"status": "ok", "message": "sent {{ steps.notify.status }} for {{ run.id }}", "n": 5}`)},
	)
	r := e.Execute(context.Background(), f, runOf(`{"n": 2, "name": "Ada", "data": {"ref": "main"}}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if got := string(r.Steps[0].Output); got != `{"data":{"ref":"main"},"fixed":7,"greet":"hi Ada","x":4}` {
		t.Errorf("set1 output %s", got)
	}
	echo := output(t, r, 1)["body"].(map[string]any)
	if echo["method"] != "PUT" || echo["body"] != `{"ref":"main","who":"hi Ada","x":4}` {
		t.Errorf("the service got %v %v", echo["method"], echo["body"])
	}
	if ct := ext.header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if q := echo["query"].(map[string]any)["src"]; fmt.Sprint(q) != "[flw_1]" {
		t.Errorf("templated url query = %v", q)
	}
	if r.Response == nil || r.Response.StatusCode != 201 ||
		string(r.Response.Body) != `{"message":"sent 200 for run_1","n":5,"status":"ok"}` {
		t.Fatalf("response = %+v", r.Response)
	}
	for _, s := range r.Steps {
		if s.StartedAt == nil || s.FinishedAt == nil || s.FinishedAt.Before(*s.StartedAt) {
			t.Errorf("step %s timing %v %v", s.Name, s.StartedAt, s.FinishedAt)
		}
	}
	if r.Started == nil || r.Finished == nil || r.DurationMs == nil {
		t.Errorf("run timing missing")
	}
}

func TestStepErrors(t *testing.T) {
	e := newEngine(t, newCredentials(), true)
	tests := []struct {
		name string
		step automation.Step
		want string
	}{
		{"code", automation.Step{Name: "js", Type: automation.StepCode, Code: "return 1"}, "step js: CODE steps are not available in this deployment"},
		{"bad template", automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ trigger.body.a.b.c }}"}`)}, "step s: values.a: expression \"trigger.body.a.b.c\": cannot fetch b from <nil>"},
		{"scheme", automation.Step{Name: "h", Type: automation.StepHTTP, URL: "file:///etc/passwd"}, "only absolute http and https URLs"},
		{"respond header", automation.Step{Name: "r", Type: automation.StepRespond, Headers: map[string]string{"X-A": "{{ 'a\\nb' }}"}}, "headers.X-A: the value contains a control character"},
		{"respond template", automation.Step{Name: "r", Type: automation.StepRespond, Body: raw(`"{{ trigger.body.a.b.c }}"`)}, "step r: body: expression"},
		{"respond status", automation.Step{Name: "r", Type: automation.StepRespond, StatusCode: 42}, "statusCode 42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.Execute(context.Background(), flowOf(tt.step), runOf(`{}`))
			if res.Run.Status != automation.RunFailed || !strings.Contains(res.Run.Error, tt.want) || res.Retryable {
				t.Fatalf("run %s %q retryable=%v; want FAILED containing %q", res.Run.Status, res.Run.Error, res.Retryable, tt.want)
			}
		})
	}
}

func TestResponseCap(t *testing.T) {
	ext := newExternal(t)
	e := New(Config{AllowPrivateNetworks: true, MaxResponseBytes: 1000})
	for _, n := range []int{1000, 5000} {
		r := e.Execute(context.Background(), flowOf(automation.Step{Name: "big", Type: automation.StepHTTP, URL: ext.URL + "/big?n=" + strconv.Itoa(n)}), runOf(`{}`)).Run
		out := output(t, r, 0)
		body, _ := out["body"].(string)
		if len(body) != 1000 || (out["truncated"] == true) != (n > 1000) {
			t.Fatalf("n=%d: kept %d bytes, truncated=%v", n, len(body), out["truncated"])
		}
	}
}

func TestTimeouts(t *testing.T) {
	ext := newExternal(t)
	e := newEngine(t, newCredentials(), true)

	// The error names the step's timeout: that, not the time it took, says
	// the timeout cut the call (/slow holds it for 5 s).
	res := e.Execute(context.Background(), flowOf(
		automation.Step{Name: "slow", Type: automation.StepHTTP, URL: ext.URL + "/slow", TimeoutMs: 200}), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || !res.Retryable || !strings.Contains(res.Run.Error, "timed out after 200ms") {
		t.Fatalf("step timeout: %s %q retryable=%v", res.Run.Status, res.Run.Error, res.Retryable)
	}

	// The run's deadline passes while its first step waits on the service
	// (when the request arrives), however slow the machine is to get there.
	ctx := deadlineAt{Context: context.Background(), done: make(chan struct{})}
	var once sync.Once
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(ctx.done) })
		<-r.Context().Done()
	}))
	t.Cleanup(held.Close)
	res = e.Execute(ctx, flowOf(
		automation.Step{Name: "slow", Type: automation.StepHTTP, URL: held.URL},
		automation.Step{Name: "after", Type: automation.StepSet}), runOf(`{}`))
	if res.Run.Status != automation.RunTimeout || statuses(res.Run) != "FAILED,SKIPPED" || !strings.Contains(res.Run.Error, "step slow") {
		t.Fatalf("run deadline: %s %s %q", res.Run.Status, statuses(res.Run), res.Run.Error)
	}
}

// deadlineAt is a context whose deadline passes when done is closed: at
// an event of the test, not after a time.
type deadlineAt struct {
	context.Context
	done chan struct{}
}

func (c deadlineAt) Done() <-chan struct{} { return c.done }

func (c deadlineAt) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestSSRFRefusedBeforeConnecting(t *testing.T) {
	ext := newExternal(t)
	_, port, _ := net.SplitHostPort(ext.Listener.Addr().String())
	e := newEngine(t, newCredentials(), false)
	tests := []string{
		ext.URL + "/echo",
		"http://localhost:" + port + "/echo",
		"http://[::ffff:127.0.0.1]:" + port + "/echo",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.1.2.3/",
		"http://[fe80::1]/",
	}
	for _, u := range tests {
		t.Run(u, func(t *testing.T) {
			start := time.Now()
			res := e.Execute(context.Background(), flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, URL: u}), runOf(`{}`))
			if res.Run.Status != automation.RunFailed || res.Retryable ||
				!strings.Contains(res.Run.Error, "is private") || !strings.Contains(res.Run.Error, "FLOWD_ALLOW_PRIVATE_NETWORKS=true") {
				t.Fatalf("run %s %q retryable=%v", res.Run.Status, res.Run.Error, res.Retryable)
			}
			// The loopback service's counters below prove no connection
			// for the loopback forms; for the unroutable ones, a connection
			// attempt would wait out the dialer's 10 s timeout. 5 s tells
			// those apart with room for a loaded machine under -race.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusal took %s: was a connection attempted?", d)
			}
		})
	}
	if a, h := ext.accepts.Load(), ext.hits.Load(); a != 0 || h != 0 {
		t.Fatalf("the loopback service saw %d connections and %d requests", a, h)
	}
}

func TestBlocked(t *testing.T) {
	tests := []struct {
		addr    string
		blocked bool
	}{
		{"127.0.0.1", true}, {"127.9.9.9", true}, {"::1", true}, {"10.0.0.1", true}, {"172.16.5.4", true},
		{"172.32.0.1", false}, {"192.168.1.1", true}, {"169.254.169.254", true}, {"fe80::1", true},
		{"fc00::1", true}, {"fd12:3456::1", true}, {"0.0.0.0", true}, {"::", true}, {"224.0.0.1", true},
		{"ff02::1", true}, {"100.64.0.1", true}, {"100.127.255.255", true}, {"100.128.0.1", false},
		{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"::ffff:10.0.0.1", true},
		{"64:ff9b::a9fe:a9fe", true}, {"2002:a9fe:a9fe::1", true}, {"255.255.255.255", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"2606:4700:4700::1111", false}, {"::ffff:8.8.8.8", false},
		{"64:ff9b::808:808", false},
	}
	for _, tt := range tests {
		err := guardControl("tcp", net.JoinHostPort(tt.addr, "443"), nil)
		var pe *privateAddrError
		if got := errors.As(err, &pe); got != tt.blocked {
			t.Errorf("%s: refused=%v (%v), want %v", tt.addr, got, err, tt.blocked)
		}
	}
}

func TestRedirects(t *testing.T) {
	const key = "custom-header-key-000111222"
	ext := newExternal(t)
	creds := newCredentials()
	empty := ""
	creds.add("con_h", key, "X-Api-Key", &empty)
	e := newEngine(t, creds, true)

	r := e.Execute(context.Background(), flowOf(automation.Step{Name: "r", Type: automation.StepHTTP, URL: ext.URL + "/redirect/4"}), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("5 redirects: %s %q", r.Status, r.Error)
	}
	r = e.Execute(context.Background(), flowOf(automation.Step{Name: "r", Type: automation.StepHTTP, URL: ext.URL + "/redirect/5"}), runOf(`{}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "stopped after 5 redirects") {
		t.Fatalf("6 redirects: %s %q", r.Status, r.Error)
	}

	// Same host: the key follows. Another host: it is dropped.
	_, port, _ := net.SplitHostPort(ext.Listener.Addr().String())
	for _, tt := range []struct {
		target  string
		wantKey bool
	}{
		{ext.URL + "/echo", true},
		{"http://localhost:" + port + "/echo", false},
	} {
		r = e.Execute(context.Background(), flowOf(automation.Step{Name: "r", Type: automation.StepHTTP, ConnectionID: "con_h",
			URL: ext.URL + "/to", Query: automation.Query{Params: map[string]string{"url": tt.target}}}), runOf(`{}`)).Run
		if r.Status != automation.RunSucceeded {
			t.Fatalf("redirect to %s: %s %q", tt.target, r.Status, r.Error)
		}
		if got := ext.header().Get("X-Api-Key") == key; got != tt.wantKey {
			t.Errorf("redirect to %s: key sent=%v, want %v", tt.target, got, tt.wantKey)
		}
	}
}

func TestVerifySignatureStep(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	sign := func(body string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(body))
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	e := newEngine(t, newCredentials(), true)
	step := automation.Step{Name: "verify", Type: automation.StepVerifySignature,
		Signature: &automation.Signature{Preset: automation.PresetGitHub, Secret: secret}}
	next := automation.Step{Name: "after", Type: automation.StepSet}
	wire := "{\"event\": \"push\"}\n" // spacing differs from the compacted Body

	tests := []struct {
		name    string
		flow    automation.Flow
		rawBody string
		body    string
		sig     string
		wantRun automation.RunStatus
	}{
		{"raw body", flowOf(step, next), wire, `{"event":"push"}`, sign(wire), automation.RunSucceeded},
		{"falls back to body", flowOf(step, next), "", `{"event":"push"}`, sign(`{"event":"push"}`), automation.RunSucceeded},
		{"signed other bytes", flowOf(step, next), wire, `{"event":"push"}`, sign(`{"event":"push"}`), automation.RunFailed},
		{"tampered", flowOf(step, next), wire + " ", `{"event":"push"}`, sign(wire), automation.RunFailed},
		{"missing header", flowOf(step, next), wire, `{"event":"push"}`, "", automation.RunFailed},
		{"webhook settings", automation.Flow{ID: "flw_1", Project: "p1",
			Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
				Signature: &automation.Signature{Preset: automation.PresetGitHub, Secret: secret}}},
			Steps: []automation.Step{{Name: "verify", Type: automation.StepVerifySignature}, next}},
			wire, `{"event":"push"}`, sign(wire), automation.RunSucceeded},
	}
	// Stripe, with the header as TriggerData joins repeated values.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	m := hmac.New(sha256.New, []byte("whsec_x"))
	m.Write([]byte(ts + "." + wire))
	stripeStep := automation.Step{Name: "verify", Type: automation.StepVerifySignature,
		Signature: &automation.Signature{Preset: automation.PresetStripe, Secret: "whsec_x"}}
	for _, sig := range []string{"t=" + ts + ", v1=" + hex.EncodeToString(m.Sum(nil)), "t=" + ts + ", v1=00ff"} {
		run := runOf(`{"event":"push"}`)
		run.Trigger.RawBody = wire
		run.Trigger.Headers["Stripe-Signature"] = sig
		r := e.Execute(context.Background(), flowOf(stripeStep), run).Run
		if want := strings.Contains(sig, "00ff"); (r.Status == automation.RunFailed) != want {
			t.Errorf("stripe %q: run %s %q", sig, r.Status, r.Error)
		}
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := runOf(tt.body)
			run.Trigger.RawBody = tt.rawBody
			if tt.sig != "" {
				run.Trigger.Headers["X-Hub-Signature-256"] = tt.sig
			}
			r := e.Execute(context.Background(), tt.flow, run).Run
			if r.Status != tt.wantRun {
				t.Fatalf("run %s %q, want %s", r.Status, r.Error, tt.wantRun)
			}
			if tt.wantRun == automation.RunFailed && (r.Error != "step verify: Invalid webhook signature" || statuses(r) != "FAILED,SKIPPED") {
				t.Fatalf("error %q steps %s", r.Error, statuses(r))
			}
		})
	}
}

func TestMask(t *testing.T) {
	secrets := []string{"k3y/with<html>&\"quotes\""}
	v := maskValue(map[string]any{
		"a": "x " + secrets[0] + " y", secrets[0]: []any{secrets[0], 1.0},
	}, secrets)
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), "k3y") || strings.Count(string(b), automation.SecretMask) != 3 {
		t.Fatalf("masked = %s", b)
	}
	if got := mask("GET x: Bearer "+secrets[0], secrets); got != "GET x: Bearer "+automation.SecretMask {
		t.Fatalf("mask = %q", got)
	}
}

func BenchmarkExecute(b *testing.B) {
	e := newEngine(b, newCredentials(), false)
	f := flowOf(
		automation.Step{Name: "set1", Type: automation.StepSet, Values: raw(`{"x": "{{ trigger.body.n * 2 }}", "who": "hi {{ trigger.body.name }}"}`)},
		automation.Step{Name: "check", Type: automation.StepFilter, Condition: "steps.set1.x > 2 && trigger.body.event == 'push'"},
		automation.Step{Name: "reply", Type: automation.StepRespond, Body: raw(`{"status": "ok", "message": "{{ steps.set1.who }} x={{ steps.set1.x }}"}`)},
	)
	run := runOf(`{"n": 2, "name": "Ada", "event": "push"}`)
	b.ReportAllocs()
	for b.Loop() {
		res := e.Execute(context.Background(), f, run)
		if res.Run.Status != automation.RunSucceeded {
			b.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
		}
	}
}

// A header value that renders with CR or LF, or a connection prefix that
// holds one, fails the step for good before anything is sent.
func TestHeaderControlCharactersFailForGood(t *testing.T) {
	x := newExternal(t)
	creds := newCredentials()
	bad := "Bearer\r\nX-Injected: 1\r\n"
	creds.add("con_bad", "k-123", "", &bad)
	tests := []struct {
		name string
		step automation.Step
		want string
	}{
		{"templated header", automation.Step{Name: "h", Type: automation.StepHTTP, URL: x.URL + "/echo",
			Headers: map[string]string{"X-Ref": "{{ trigger.body.ref }}"}}, "headers.X-Ref: the value contains a control character"},
		{"NUL in a header", automation.Step{Name: "h", Type: automation.StepHTTP, URL: x.URL + "/echo",
			Headers: map[string]string{"X-Ref": "a{{ trigger.body.nul }}"}}, "control character"},
		{"connection prefix", automation.Step{Name: "h", Type: automation.StepHTTP, URL: x.URL + "/echo",
			ConnectionID: "con_bad"}, "con_bad: its key or prefix contains a control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := x.hits.Load()
			res := newEngine(t, creds, true).Execute(context.Background(), flowOf(tt.step),
				runOf(`{"ref": "a\r\nX-Injected: 1", "nul": "\u0000"}`))
			r := res.Run
			if r.Status != automation.RunFailed || res.Retryable || !strings.Contains(r.Steps[0].Error, tt.want) {
				t.Fatalf("run %s retryable=%v step error %q, want FAILED for good with %q", r.Status, res.Retryable, r.Steps[0].Error, tt.want)
			}
			if strings.Contains(r.Error, "k-123") {
				t.Errorf("error %q reveals the key", r.Error)
			}
			if n := x.hits.Load() - before; n != 0 {
				t.Errorf("%d requests reached the service", n)
			}
		})
	}
}
