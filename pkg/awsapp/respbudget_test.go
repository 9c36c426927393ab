package awsapp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/emf"
	"flowservice/pkg/respbudget"
)

// LambdaBudget measures an answer as the proxy response carries it: 2 MB
// of quotes is a 4 MB body, within flowd's 5 MiB, but 8 MB once escaped
// again inside the proxy response, so Lambda's budget cuts it, down to a
// proxy response within ResponseBudget.
func TestResponseBudgetMeasure(t *testing.T) {
	quotes := strings.Repeat(`"`, 2_000_000)
	body, _ := json.Marshal(map[string]any{"id": "run_1", "trigger": map[string]any{"body": map[string]string{"html": quotes}}})
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	if out, _, ok := respbudget.Default().Fit(h, body, "/r"); !ok || len(out) != len(body) {
		t.Fatalf("flowd's budget cut a %d-byte body", len(body))
	}
	out, size, ok := LambdaBudget(ResponseBudget).Fit(h, body, "/r")
	resp := events.APIGatewayProxyResponse{StatusCode: 200, MultiValueHeaders: h, Body: string(out)}
	if !ok || size > ResponseBudget || responseSize(&resp) != size {
		t.Fatalf("cut to %d bytes (ok %v), proxy response %d, budget %d", size, ok, responseSize(&resp), ResponseBudget)
	}
	var got struct {
		Trigger struct {
			Body struct{ HTML respbudget.Marker }
		}
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Trigger.Body.HTML.Href != "/r?part=%2Ftrigger%2Fbody%2Fhtml" {
		t.Errorf("cut answer %.300s (%v)", out, err)
	}
	// A piece of the worst string (all control bytes, 6 bytes each in the
	// body, 7 in the proxy response) fits.
	worst, _ := json.Marshal(map[string]string{"s": strings.Repeat("\x01", 6<<20)})
	piece, _, err := LambdaBudget(ResponseBudget).Part(h, worst, "/r", respbudget.Request{Part: "/s"})
	resp.Body = string(piece)
	if err != nil || responseSize(&resp) > ResponseBudget {
		t.Errorf("a piece of control bytes takes %d bytes as Lambda returns it (%v)", responseSize(&resp), err)
	}
	// So does a slice of the worst array (strings of a quote, escaped
	// twice in the proxy response).
	quoted := make([]string, 2<<20)
	for i := range quoted {
		quoted[i] = `"`
	}
	worst, _ = json.Marshal(map[string]any{"a": quoted})
	slice, _, err := LambdaBudget(ResponseBudget).Part(h, worst, "/r", respbudget.Request{Part: "/a"})
	var sl respbudget.PartSlice
	resp.Body = string(slice)
	if err := errors.Join(err, json.Unmarshal(slice, &sl)); err != nil || responseSize(&resp) > ResponseBudget || !sl.Truncated || sl.Count != len(quoted) {
		t.Errorf("a slice of quotes takes %d bytes as Lambda returns it, count %d (%v)", responseSize(&resp), sl.Count, err)
	}
}

// Any function's answer still over the budget (a receiver's, the
// dashboard's) becomes a 500 RESPONSE_TOO_LARGE envelope with the
// request's ID, which Lambda returns, instead of a failed invocation.
func TestResponseBudgetLastGuard(t *testing.T) {
	a := &App{metrics: emf.New(io.Discard, "test")}
	h := a.Proxy("webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, strings.Repeat("<p>", 2<<20))
	}))
	resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/x"})
	var e struct {
		Error struct{ Code, RequestID string }
	}
	if err != nil || resp.StatusCode != 500 || json.Unmarshal([]byte(resp.Body), &e) != nil || e.Error.Code != "RESPONSE_TOO_LARGE" ||
		e.Error.RequestID != "req-1" || http.Header(resp.MultiValueHeaders).Get("Content-Type") != "application/json" {
		t.Errorf("text over the budget: %d %.200s %v (%v)", resp.StatusCode, resp.Body, resp.MultiValueHeaders, err)
	}
}
