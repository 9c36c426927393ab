package lambdacode_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"flowservice/pkg/automation"
	"flowservice/pkg/jscode"
	"flowservice/pkg/lambdacode"
	"flowservice/pkg/sandbox"
)

// The test binary serves as the code function's sandbox binary.
func TestMain(m *testing.M) {
	sandbox.MaybeServe()
	os.Exit(m.Run())
}

// fakeLambda is the Lambda Invoke API on loopback: it hands the payload to
// handle, as the Lambda service hands it to the code function.
func fakeLambda(t *testing.T, handle func(w http.ResponseWriter, function string, payload []byte)) aws.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
		name, ok2 := strings.CutSuffix(name, "/invocations")
		if !ok || !ok2 || r.Method != http.MethodPost {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		// Signed as the Lambda API expects: SigV4 for the lambda service.
		if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=test/") ||
			!strings.Contains(a, "/us-east-1/lambda/aws4_request") || r.Header.Get("X-Amz-Date") == "" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message": "unsigned request"}`))
			return
		}
		payload, _ := io.ReadAll(r.Body)
		handle(w, name, payload)
	}))
	t.Cleanup(srv.Close)
	return aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

func TestRunnerThroughCodeFunction(t *testing.T) {
	pool, err := sandbox.New(sandbox.Config{Idle: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	handler := lambdacode.Handler(pool, jscode.Check)
	var invoked string
	cfg := fakeLambda(t, func(w http.ResponseWriter, function string, payload []byte) {
		invoked = function
		var req automation.CodeRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := handler(context.Background(), req)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			json.NewEncoder(w).Encode(map[string]string{"errorMessage": err.Error(), "errorType": "errorString"})
			return
		}
		json.NewEncoder(w).Encode(res)
	})
	r := lambdacode.New(cfg, "flow-prod-code")

	res, err := r.RunCode(context.Background(), automation.CodeRequest{
		Code: `console.log("sum"); return {sum: trigger.body.a + trigger.body.b}`, Scope: []byte(`{"trigger": {"body": {"a": 2, "b": 3}}}`)})
	if err != nil || string(res.Output) != `{"sum":5}` || len(res.Logs) != 1 || invoked != "flow-prod-code" {
		t.Fatalf("RunCode = %s %q %q %v (invoked %q)", res.Output, res.Logs, res.Error, err, invoked)
	}
	res, err = r.RunCode(context.Background(), automation.CodeRequest{Code: `while (true) {}`, TimeoutMs: 200})
	if err != nil || !strings.Contains(res.Error, "200ms timeout") {
		t.Errorf("a looping script: %q %v", res.Error, err)
	}
	// A request the function refuses is a function error: an error, so
	// the step is retried rather than failed as the script's fault.
	if _, err := r.RunCode(context.Background(), automation.CodeRequest{}); err == nil || !strings.Contains(err.Error(), "the request has no code") {
		t.Errorf("function error = %v", err)
	}
	res, err = r.RunCode(context.Background(), automation.CodeRequest{Code: "return 1", Scope: []byte(`{"trigger": {"body": "` + strings.Repeat("x", lambdacode.MaxPayload) + `"}}`)})
	if err != nil || !strings.Contains(res.Error, "at most 6000000") {
		t.Errorf("oversized request: %q %v", res.Error, err)
	}
}

func TestRunnerInvokeFails(t *testing.T) {
	cfg := fakeLambda(t, func(w http.ResponseWriter, _ string, _ []byte) {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"Type": "User", "message": "Function not found"}`))
	})
	_, err := lambdacode.New(cfg, "missing").RunCode(context.Background(), automation.CodeRequest{Code: "return 1"})
	if err == nil || !strings.Contains(err.Error(), "invoke missing") {
		t.Errorf("RunCode against a missing function = %v", err)
	}
}
