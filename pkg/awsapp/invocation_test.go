package awsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"flowservice/pkg/emf"
)

// TestInvocationLogs: each log line of an invocation names the Lambda
// request, the X-Ray trace, API Gateway's request and whether it was the
// cold start, which is counted once.
func TestInvocationLogs(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Stage: "prod", LogOutput: &out}
	a := &App{Log: newLogger(cfg), metrics: emf.New(&out, "prod")}
	h := a.Proxy("api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Log.InfoContext(r.Context(), "served")
		w.WriteHeader(204)
	}))
	for _, id := range []string{"lambda-1", "lambda-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		//lint:ignore SA1029 the Lambda runtime's own key
		ctx = context.WithValue(ctx, "x-amzn-trace-id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1")
		if _, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/x",
			RequestContext: events.APIGatewayProxyRequestContext{RequestID: "apigw-" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	var logs []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		_ = json.Unmarshal(l, &m)
		if m["msg"] == "served" {
			logs = append(logs, m)
		}
	}
	if len(logs) != 2 {
		t.Fatalf("log lines %v", logs)
	}
	for i, want := range []struct {
		id   string
		cold bool
	}{{"lambda-1", true}, {"lambda-2", false}} {
		l := logs[i]
		if l["awsRequestId"] != want.id || l["apiRequestId"] != "apigw-"+want.id || l["coldStart"] != want.cold ||
			l["traceId"] != "1-5bef4de7-ad49b0e87f6ef6c87fc2e700" {
			t.Errorf("log line %d = %v", i, l)
		}
	}
	var cold []any
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["ColdStarts"] != nil {
			cold = append(cold, m["Function"])
		}
	}
	if !slices.Equal(cold, []any{"api"}) {
		t.Errorf("ColdStarts by function = %v, want one for api", cold)
	}
}

func TestMemoryLimit(t *testing.T) {
	if got := memoryLimit(env(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"})); got != 512<<20*9/10 {
		t.Errorf("limit for 512 MB = %d", got)
	}
	if got := memoryLimit(env(nil)); got != 0 {
		t.Errorf("no size: limit %d", got)
	}
}
