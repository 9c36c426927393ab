package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/respbudget"
	"flowservice/pkg/respbudget/budgettest"
)

// partsEnv is the API with a small answer budget, and the flow builder
// receiver, over one Service.
type partsEnv struct {
	api, hook *testServer
	key       string
	budget    respbudget.Budget
}

func newPartsEnv(t *testing.T) *partsEnv {
	t.Helper()
	return newPartsEnvWith(t, respbudget.Budget{Bytes: 96 << 10})
}

func newPartsEnvWith(t *testing.T, budget respbudget.Budget) *partsEnv {
	t.Helper()
	svc := flowtest.New(t, flowtest.Options{}).Svc
	api := serve(t, NewAPI(svc, nil, WithResponseBudget(budget)))
	api.svc = svc
	return &partsEnv{api: api, hook: serve(t, NewWebhook(svc, HookConfig{})), key: newProjectKey(t, api, automation.PlanEnterprise), budget: budget}
}

// bigRun starts a run of a new flow whose trigger body is {"html": html}.
func (e *partsEnv) bigRun(t *testing.T, html string) (runPath string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"html": html})
	return e.runOf(t, body)
}

// runOf starts a run of a new flow whose trigger body is body (JSON).
func (e *partsEnv) runOf(t *testing.T, body []byte) (runPath string) {
	t.Helper()
	f := createFlow(t, e.api, e.key, `{"name":"big","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"n":1}}]}`)
	call(t, e.api, "POST", "/api/v1/flows/"+f.ID+"/enable", e.key, "").into(t, 200, &flowView{})
	runID := call(t, e.hook, "POST", "/api/v1/webhooks/"+f.ID, "", string(body)).started(t)
	return "/api/v1/flows/" + f.ID + "/runs/" + runID
}

// smallElements is a JSON array of n single digits and an object of
// about n/3 members of a digit: bodies no marker can shrink.
func smallElements(n int) (array, object []byte) {
	nums := make([]int, n)
	members := map[string]int{}
	for i := range nums {
		nums[i] = i % 10
		if i%3 == 0 {
			members["k"+strconv.Itoa(i)] = i % 10
		}
	}
	array, _ = json.Marshal(nums)
	object, _ = json.Marshal(members)
	return array, object
}

// TestLargeArraysOnFlowd: a trigger body that is a large array of numbers
// (a batch webhook), or an object of many small members, reads back whole
// in slices (budgettest.CheckSlices, as on Lambda: pkg/awsapp's
// TestLargeArraysOnMoto), each measured a bounded number of times. It was
// a 500 RESPONSE_TOO_LARGE, and before that a link that never answered.
func TestLargeArraysOnFlowd(t *testing.T) {
	var measures atomic.Int64
	budget := respbudget.Budget{Bytes: 96 << 10}
	budget.Size = func(_ http.Header, b []byte) int { measures.Add(1); return len(b) }
	e := newPartsEnvWith(t, budget)
	get := func(t *testing.T, path string, query url.Values) (int, string, []byte) {
		t.Helper()
		if len(query) > 0 {
			path += "?" + query.Encode()
		}
		r := call(t, e.api, "GET", path, e.key, "")
		return r.status, r.header.Get("Content-Type"), r.body
	}
	array, object := smallElements(150_000)
	for _, body := range [][]byte{array, object} {
		budgettest.CheckSlices(t, get, budget, e.runOf(t, body), body, func() int { return int(measures.Load()) })
	}
}

// bigHTML is about n bytes of HTML: <, > and &, which stored runs hold as
// 6-byte escapes and answers as themselves.
func bigHTML(n int) string {
	const unit = "<p>row &amp; more</p>\n"
	return strings.Repeat(unit, n/len(unit)+1)
}

// TestLargeAnswersOnFlowd: flowd cuts an answer over its budget as the
// Lambda api function does (pkg/awsapp's TestLargeAnswersOnMoto runs the
// same budgettest.CheckRun), over real HTTP, every exchange checked
// against openapi.json.
func TestLargeAnswersOnFlowd(t *testing.T) {
	e := newPartsEnv(t)
	html := bigHTML(300 << 10)
	runPath := e.bigRun(t, html)
	get := func(t *testing.T, path string, query url.Values) (int, string, []byte) {
		t.Helper()
		if len(query) > 0 {
			path += "?" + query.Encode()
		}
		r := call(t, e.api, "GET", path, e.key, "")
		return r.status, r.header.Get("Content-Type"), r.body
	}
	budgettest.CheckRun(t, get, e.budget, runPath, html)

	// A retry answers the new run cut, its markers pointing at the new
	// run's own GET (its Location), not at the POST.
	r := call(t, e.api, "POST", runPath+"/retry", e.key, "")
	var retried struct {
		ID      string
		Trigger struct {
			Body struct{ HTML respbudget.Marker }
		}
	}
	r.into(t, http.StatusCreated, &retried)
	loc := r.header.Get("Location")
	if m := retried.Trigger.Body.HTML; len(r.body) > e.budget.Bytes || !m.Truncated || m.Href != loc+"?part=%2Ftrigger%2Fbody%2Fhtml" {
		t.Errorf("retry answer %d bytes, marker %+v, Location %s", len(r.body), m, loc)
	}

	// Under the budget nothing changes: the answer is whole and unescaped.
	small := bigHTML(10 << 10)
	g := call(t, e.api, "GET", e.bigRun(t, small), e.key, "")
	var whole struct {
		Trigger struct{ Body struct{ HTML string } }
	}
	if err := json.Unmarshal(g.body, &whole); err != nil || whole.Trigger.Body.HTML != small || strings.Contains(string(g.body), `\u003c`) {
		t.Errorf("small run: %v, %d bytes of html, escaped %v", err, len(whole.Trigger.Body.HTML), strings.Contains(string(g.body), `\u003c`))
	}
}

// TestLargeAnswerNotJSON: an answer that cannot be cut (not JSON) and is
// over the budget is a 500 RESPONSE_TOO_LARGE envelope; part on an answer
// that is not JSON is a 400 naming part.
func TestLargeAnswerNotJSON(t *testing.T) {
	a := NewAPI(nil, nil, WithResponseBudget(respbudget.Budget{Bytes: 1000})).(*API)
	h := a.budgeted(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("part") {
			t.Error("the handler saw part")
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, strings.Repeat("x", 2000))
	}))
	serveOne := func(target string) (int, errorDetail) {
		req, _ := http.NewRequestWithContext(withInfo(context.Background(), &requestInfo{id: "req-1"}), "GET", target, nil)
		rec := &bufferWriter{header: http.Header{}}
		h.ServeHTTP(rec, req)
		var e errorBody
		_ = json.Unmarshal(rec.body.Bytes(), &e)
		return rec.status, e.Error
	}
	if status, e := serveOne("/x"); status != 500 || e.Code != "RESPONSE_TOO_LARGE" || e.RequestID != "req-1" {
		t.Errorf("text over the budget: %d %+v", status, e)
	}
	if status, e := serveOne("/x?part=/a"); status != 400 || e.Code != "INVALID_PARAMETER" || !strings.HasPrefix(e.Message, "part: ") {
		t.Errorf("part of text: %d %+v", status, e)
	}
}

type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) WriteHeader(s int)   { b.status = s }
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = 200
	}
	return b.body.Write(p)
}
