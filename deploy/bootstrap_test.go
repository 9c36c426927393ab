package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// runtimeAPI is a Lambda Runtime API on loopback that hands out one event
// and records what the function answers, as the Lambda service does for a
// provided.al2023 function.
type runtimeAPI struct {
	srv      *httptest.Server
	event    []byte
	reqID    string
	served   sync.Once
	done     chan struct{} // closed by the first answer
	stop     chan struct{} // closed when the test ends: releases waiting polls
	mu       sync.Mutex
	response []byte
	errBody  string
}

func newRuntimeAPI(t *testing.T, event []byte) *runtimeAPI {
	rt := &runtimeAPI{event: event, reqID: "8476a536-e9f4-11e8-9739-2dfe598c3fcd", done: make(chan struct{}), stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", rt.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, r *http.Request) {
		rt.answer(w, r, false)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		rt.answer(w, r, true)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		rt.answer(w, r, true)
	})
	rt.srv = httptest.NewServer(mux) // 127.0.0.1, a free port
	t.Cleanup(func() {
		close(rt.stop)
		rt.srv.Close()
	})
	return rt
}

// next hands out the event once; later polls wait, as they do on Lambda
// between invocations, until the test ends.
func (rt *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	first := false
	rt.served.Do(func() { first = true })
	if !first {
		select {
		case <-rt.stop:
		case <-r.Context().Done():
		}
		http.Error(w, "runtime stopping", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Lambda-Runtime-Aws-Request-Id", rt.reqID)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:flow-test-api")
	h.Set("Lambda-Runtime-Trace-Id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1")
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(rt.event)
}

func (rt *runtimeAPI) answer(w http.ResponseWriter, r *http.Request, failed bool) {
	body, _ := io.ReadAll(r.Body)
	rt.mu.Lock()
	if failed {
		rt.errBody = r.URL.Path + ": " + string(body)
	} else if id := r.PathValue("id"); id != rt.reqID {
		rt.errBody = "answer for unknown request " + id
	} else {
		rt.response = body
	}
	rt.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	select {
	case <-rt.done:
	default:
		close(rt.done)
	}
}

// TestBootstrapBinary builds the api function's bootstrap as `sam build`
// does (for this machine's OS and architecture, so it can run here), starts
// it against the local Runtime API with the environment the template sets
// and moto as AWS, and checks its answer to api-list-flows.json.
func TestBootstrapBinary(t *testing.T) {
	st := newStack(t)
	st.flow(t, formFlow, false)

	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../functions/api")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ev := event(t, "api-list-flows.json", map[string]string{"__API_KEY__": st.key})
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(ev, &req); err != nil {
		t.Fatal(err)
	}
	apiRequestID := req.RequestContext.RequestID
	rt := newRuntimeAPI(t, ev)
	endpoint := *st.aws.BaseEndpoint
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(rt.srv.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=flow-test-api",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		// moto as AWS: static fake credentials, explicit endpoint, no IMDS,
		// no shared config files.
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		// What template.yaml sets.
		"STAGE=test", "LOG_LEVEL=info",
		"TABLE_PROJECTS=" + st.cfg.Tables.Projects, "TABLE_KEYS=" + st.cfg.Tables.Keys,
		"TABLE_FLOWS=" + st.cfg.Tables.Flows, "TABLE_ROUTES=" + st.cfg.Tables.Routes,
		"TABLE_CONNECTIONS=" + st.cfg.Tables.Connections, "TABLE_RUNS=" + st.cfg.Tables.Runs,
		"TABLE_SAMPLES=" + st.cfg.Tables.Samples, "TABLE_AUDIT=" + st.cfg.Tables.Audit,
		"QUEUE_URL=" + st.cfg.QueueURL, "PAYLOAD_BUCKET=" + st.cfg.PayloadBucket,
		"SECRET_PREFIX=" + st.cfg.SecretPrefix, "CURSOR_KEY_SECRET_ARN=" + st.cfg.CursorKeySecretARN,
		"QUEUE_ARN=" + st.cfg.QueueARN, "SCHEDULE_GROUP=" + st.cfg.ScheduleGroup, "SCHEDULER_ROLE_ARN=" + st.cfg.SchedulerRoleARN,
		"ENGINE_URL=" + st.cfg.EngineURL, "WORKFLOW_URL=" + st.cfg.WorkflowURL,
		"RUN_TIMEOUT=300s", "ALLOWED_CIDRS=0.0.0.0/0,::/0",
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs []string
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs = append(logs, sc.Text())
		}
	}()
	t.Cleanup(func() {
		// Stopped by its PID, as Lambda freezes and ends environments.
		_ = cmd.Process.Kill()
		<-logsDone
		_ = cmd.Wait()
	})

	select {
	case <-rt.done:
	case <-time.After(60 * time.Second):
		t.Fatal("no answer from the bootstrap within 60 s")
	}
	rt.mu.Lock()
	respBody, errBody := rt.response, rt.errBody
	rt.mu.Unlock()
	if errBody != "" {
		t.Fatalf("the function reported an error: %s", errBody)
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(respBody, &resp); err != nil {
		t.Fatalf("response %s: %v", respBody, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	var list struct {
		Data []struct{ Name string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &list); err != nil || len(list.Data) != 1 || list.Data[0].Name != "Form intake" {
		t.Errorf("body %s (%v), want the seeded flow", resp.Body, err)
	}

	// Its logs are JSON lines that name the invocation (Lambda request,
	// API Gateway request, X-Ray trace, cold start), and its metrics are
	// EMF lines, the cold start among them.
	_ = cmd.Process.Kill()
	<-logsDone
	var tagged, coldMetric bool
	for _, l := range logs {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("log line is not JSON: %s", l)
			continue
		}
		if rec["awsRequestId"] == rt.reqID && rec["traceId"] == "1-5bef4de7-ad49b0e87f6ef6c87fc2e700" &&
			rec["apiRequestId"] == apiRequestID && rec["coldStart"] == true {
			tagged = true
		}
		if _, ok := rec["_aws"]; ok && rec["ColdStarts"] == 1.0 && rec["Function"] == "api" {
			coldMetric = true
		}
	}
	if !tagged {
		t.Errorf("no log line carries awsRequestId %s, the trace ID, apiRequestId %s and coldStart: %v", rt.reqID, apiRequestID, logs)
	}
	if !coldMetric {
		t.Errorf("no ColdStarts metric line: %v", logs)
	}
}

// TestBinarySizes builds every function as `make build-lambdas` does
// (linux/arm64) and checks each stays under its bound (27.2 MB; the api
// function 29 MB, see docs/aws.md) and links only what it
// serves: cold starts grow with the package. The dashboard and the OpenAPI
// document are the api function's alone, and only it can change schedules.
func TestBinarySizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds five binaries")
	}
	// Marks of what only the api function may hold, found in the binary
	// itself (the linker drops what no code reaches, so importing a
	// package is not the test).
	apiOnly := map[string]string{
		"the OpenAPI document": `the embedded OpenAPI document`, // its decompression (httpapi/openapi.go)
		"the MCP server":       `flowservice/pkg/mcpserver`,     // /mcp, mounted by the api wiring only
		"the dashboard":        `static/builder.js`,             // the editor's script (the approval page's form is every receiver's)
		"a scheduler client":   `CreateSchedule`,
	}
	dir := t.TempDir()
	for _, fn := range []string{"api", "webhook", "workflowhook", "runner", "code"} {
		out := filepath.Join(dir, fn, "bootstrap")
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", out, "../functions/"+fn)
		build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn, err, b)
		}
		bin, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f MB", fn, float64(len(bin))/1e6)
		// The api function carries the dashboard, the API document and
		// every management rule; version 4's quotas, version pruning and
		// server-side apply compare took it from 14.9 to 15.1 MB.
		// OpenTelemetry's SDK and OTLP/HTTP exporter (pkg/tracing) added
		// about 5 MB to each function that runs flows (api 20.3, the
		// others 19.1 MB): the OTLP types it sends link gRPC's and
		// grpc-gateway's packages. One secret per project (pkg/smsecrets:
		// the UpdateSecretVersionStage operation, the document's coding)
		// added 131 KB to the functions that write secrets (workflowhook
		// 19.40 to 19.53 MB, measured with this build's flags).
		// The api function also carries people's sign-in: go-oidc with
		// go-jose, argon2 (20.97 MB before one secret per project, 21.10
		// after). SQL and EMAIL steps link the PostgreSQL (pgx) and MySQL
		// drivers and go-mail into every function that runs flows (the
		// receivers run ON_COMPLETION flows inline): about 5.4 MB more
		// (api 26.7, the others 24.9-25.0 MB), still a tenth of Lambda's
		// 250 MB. MCP steps and AI steps' MCP tools link the official MCP
		// Go SDK (github.com/modelcontextprotocol/go-sdk, with
		// jsonschema-go, uritemplate and segmentio/encoding) into every
		// function that runs flows: about 1.77 MB more (runner 24.90 to
		// 26.67 MB, api 26.74 to 28.44 MB). The MCP server (/mcp,
		// pkg/mcpserver on the same SDK's server side) is the api
		// function's alone (docs/aws.md).
		bound := 27_200_000
		if fn == "api" {
			bound = 29_000_000
		}
		if len(bin) >= bound {
			t.Errorf("%s bootstrap is %d bytes, over its bound of %d", fn, len(bin), bound)
		}
		// No JavaScript engine but in the code function, the one that runs
		// CODE steps (the others reach it by Lambda Invoke); it must link
		// the sandbox, or it could not run them.
		deps, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "../functions/"+fn).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", fn, err)
		}
		sandbox := false
		for _, d := range strings.Fields(string(deps)) {
			if d == "flowservice/pkg/sandbox" {
				sandbox = true
			}
			if fn == "code" {
				continue
			}
			if strings.Contains(d, "pkg/sandbox") || strings.Contains(d, "goja") || strings.Contains(d, "quickjs") || strings.Contains(d, "otto") {
				t.Errorf("%s links %s, a JavaScript engine", fn, d)
			}
		}
		if fn == "code" && !sandbox {
			t.Error("code does not link flowservice/pkg/sandbox: it could not run CODE steps")
		}
		for what, mark := range apiOnly {
			if has := bytes.Contains(bin, []byte(mark)); has != (fn == "api") {
				t.Errorf("%s bootstrap: holds %s = %v, want %v", fn, what, has, fn == "api")
			}
		}
	}
}
