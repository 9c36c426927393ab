package awsapp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/respbudget"
	"flowservice/pkg/respbudget/budgettest"
)

// TestLargeAnswersOnMoto: the api function cuts an answer over its budget
// (here a small one, Config.ResponseBudget) as flowd does: the same
// budgettest.CheckRun as pkg/httpapi's TestLargeAnswersOnFlowd, through
// the function's proxy handler, the run's trigger body in DynamoDB and
// the payload bucket on moto. The budget counts the answer as Lambda
// returns it, so every answer's proxy response stays within it.
func TestLargeAnswersOnMoto(t *testing.T) {
	ps := newPartsStage(t)
	// HTML: <, > and & answer as themselves (one byte each, twice in the
	// proxy response's string); quotes take 2 bytes in the body, 4 in the
	// proxy response.
	html := strings.Repeat(`<p class="row">row &amp; more</p>`, 300<<10/34)
	body, _ := json.Marshal(map[string]string{"html": html})
	budgettest.CheckRun(t, ps.get, ps.budget, ps.runOf(t, body), html)
}

// TestLargeArraysOnMoto: a trigger body that is a large array of numbers
// (a batch webhook) or an object of many small members reads back whole
// in slices through the api function, as on flowd (the same
// budgettest.CheckSlices as pkg/httpapi's TestLargeArraysOnFlowd).
func TestLargeArraysOnMoto(t *testing.T) {
	ps := newPartsStage(t)
	nums := make([]int, 150_000)
	members := map[string]int{}
	for i := range nums {
		nums[i] = i % 10
		if i%3 == 0 {
			members["k"+strconv.Itoa(i)] = i % 10
		}
	}
	array, _ := json.Marshal(nums)
	object, _ := json.Marshal(members)
	for _, body := range [][]byte{array, object} {
		budgettest.CheckSlices(t, ps.get, ps.budget, ps.runOf(t, body), body, nil)
	}
}

// partsStage is a stage on moto with a small answer budget
// (Config.ResponseBudget): the api and webhook functions' proxy handlers.
type partsStage struct {
	api, hook awsapp.ProxyHandler
	key       string
	budget    respbudget.Budget
}

func newPartsStage(t *testing.T) *partsStage {
	t.Helper()
	ctx := context.Background()
	st := newMotoStage(t, "parts", awsapp.Config{Stage: "test", LogOutput: io.Discard,
		RunPolicy: automation.RunPolicy{MaxAttempts: 1}, ResponseBudget: 96 << 10})
	api, err := management.NewHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &partsStage{api: api, hook: hook, key: st.Key, budget: awsapp.LambdaBudget(st.Cfg.ResponseBudget)}
}

func (ps *partsStage) invoke(t *testing.T, h awsapp.ProxyHandler, method, path string, query url.Values, body string) events.APIGatewayProxyResponse {
	t.Helper()
	ev := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
		MultiValueHeaders:               map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + ps.key}},
		MultiValueQueryStringParameters: query,
		RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}}
	resp, err := h(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// runOf starts a run of a new flow whose trigger body is body (JSON) and
// answers its path.
func (ps *partsStage) runOf(t *testing.T, body []byte) string {
	t.Helper()
	var flow struct{ ID string }
	if r := ps.invoke(t, ps.api, "POST", "/api/v1/flows", nil, `{"name": "big", "engine": "FLOW_BUILDER",
		"steps": [{"name": "s", "type": "SET", "values": {"n": 1}}]}`); r.StatusCode != 201 || json.Unmarshal([]byte(r.Body), &flow) != nil {
		t.Fatalf("create flow: %d %s", r.StatusCode, r.Body)
	}
	if r := ps.invoke(t, ps.api, "POST", "/api/v1/flows/"+flow.ID+"/enable", nil, ""); r.StatusCode != 200 {
		t.Fatalf("enable: %d %s", r.StatusCode, r.Body)
	}
	var accepted struct{ RunID string }
	if r := ps.invoke(t, ps.hook, "POST", "/api/v1/webhooks/"+flow.ID, nil, string(body)); r.StatusCode != 200 || json.Unmarshal([]byte(r.Body), &accepted) != nil {
		t.Fatalf("webhook: %d %.300s", r.StatusCode, r.Body)
	}
	return "/api/v1/flows/" + flow.ID + "/runs/" + accepted.RunID
}

// get answers a GET through the api function, checking that the proxy
// response stays within the budget.
func (ps *partsStage) get(t *testing.T, path string, query url.Values) (int, string, []byte) {
	t.Helper()
	r := ps.invoke(t, ps.api, "GET", path, query, "")
	if out, _ := json.Marshal(r); len(out) > ps.budget.Bytes {
		t.Errorf("GET %s %v: the proxy response is %d bytes, over the budget %d", path, query, len(out), ps.budget.Bytes)
	}
	return r.StatusCode, http.Header(r.MultiValueHeaders).Get("Content-Type"), []byte(r.Body)
}
