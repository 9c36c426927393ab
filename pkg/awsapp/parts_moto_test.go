package awsapp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/respbudget/budgettest"
)

// TestLargeAnswersOnMoto: the api function cuts an answer over its budget
// (here a small one, Config.ResponseBudget) as flowd does: the same
// budgettest.CheckRun as pkg/httpapi's TestLargeAnswersOnFlowd, through
// the function's proxy handler, the run's trigger body in DynamoDB and
// the payload bucket on moto. The budget counts the answer as Lambda
// returns it, so every answer's proxy response stays within it.
func TestLargeAnswersOnMoto(t *testing.T) {
	ctx := context.Background()
	st := newMotoStage(t, "parts", awsapp.Config{Stage: "test", LogOutput: io.Discard,
		RunPolicy: automation.RunPolicy{MaxAttempts: 1}, ResponseBudget: 96 << 10})
	awsCfg, cfg, key := st.AWS, st.Cfg, st.Key
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	budget := awsapp.LambdaBudget(cfg.ResponseBudget)
	invoke := func(t *testing.T, h awsapp.ProxyHandler, method, path string, query url.Values, body string) events.APIGatewayProxyResponse {
		t.Helper()
		ev := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders:               map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			MultiValueQueryStringParameters: query,
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}}
		resp, err := h(ctx, ev)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}

	var flow struct{ ID string }
	if r := invoke(t, api, "POST", "/api/v1/flows", nil, `{"name": "big", "engine": "FLOW_BUILDER",
		"steps": [{"name": "s", "type": "SET", "values": {"n": 1}}]}`); r.StatusCode != 201 || json.Unmarshal([]byte(r.Body), &flow) != nil {
		t.Fatalf("create flow: %d %s", r.StatusCode, r.Body)
	}
	if r := invoke(t, api, "POST", "/api/v1/flows/"+flow.ID+"/enable", nil, ""); r.StatusCode != 200 {
		t.Fatalf("enable: %d %s", r.StatusCode, r.Body)
	}
	// HTML: <, > and & answer as themselves (one byte each, twice in the
	// proxy response's string); quotes take 2 bytes in the body, 4 in the
	// proxy response.
	html := strings.Repeat(`<p class="row">row &amp; more</p>`, 300<<10/34)
	body, _ := json.Marshal(map[string]string{"html": html})
	var accepted struct{ RunID string }
	if r := invoke(t, hook, "POST", "/api/v1/webhooks/"+flow.ID, nil, string(body)); r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &accepted) != nil {
		t.Fatalf("webhook: %d %.300s", r.StatusCode, r.Body)
	}
	get := func(t *testing.T, path string, query url.Values) (int, string, []byte) {
		t.Helper()
		r := invoke(t, api, "GET", path, query, "")
		if out, _ := json.Marshal(r); len(out) > budget.Bytes {
			t.Errorf("GET %s %v: the proxy response is %d bytes, over the budget %d", path, query, len(out), budget.Bytes)
		}
		return r.StatusCode, http.Header(r.MultiValueHeaders).Get("Content-Type"), []byte(r.Body)
	}
	budgettest.CheckRun(t, get, budget, "/api/v1/flows/"+flow.ID+"/runs/"+accepted.RunID, html)
}
