package awsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"

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
	// The log lines of the handler, and the cold-start metric, in order.
	type line struct {
		Msg          string `json:"msg"`
		AWSRequestID string `json:"awsRequestId"`
		APIRequestID string `json:"apiRequestId"`
		TraceID      string `json:"traceId"`
		ColdStart    bool   `json:"coldStart"`
		ColdStarts   int    // the metric's value
		Function     string // the metric's dimension
	}
	var got []line
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m line
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if m.Msg == "served" || m.ColdStarts > 0 {
			got = append(got, m)
		}
	}
	const trace = "1-5bef4de7-ad49b0e87f6ef6c87fc2e700"
	want := []line{
		{ColdStarts: 1, Function: "api"},
		{Msg: "served", AWSRequestID: "lambda-1", APIRequestID: "apigw-lambda-1", TraceID: trace, ColdStart: true},
		{Msg: "served", AWSRequestID: "lambda-2", APIRequestID: "apigw-lambda-2", TraceID: trace},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines and cold starts (-want +got):\n%s", diff)
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
