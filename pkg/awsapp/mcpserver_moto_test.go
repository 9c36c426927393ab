package awsapp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// proxyTransport hands each HTTP request to a Lambda proxy handler as API
// Gateway's REST integration would, and its answer back: an MCP client
// talks to the api function itself.
type proxyTransport struct {
	h awsapp.ProxyHandler
}

func (p proxyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	resp, err := p.h(r.Context(), events.APIGatewayProxyRequest{HTTPMethod: r.Method, Path: r.URL.Path, Body: string(body),
		MultiValueHeaders: r.Header,
		RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: r.Method, Path: r.URL.Path,
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
	if err != nil {
		return nil, err
	}
	out := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return nil, err
		}
	}
	h := http.Header{}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	return &http.Response{StatusCode: resp.StatusCode, Header: h, Body: io.NopCloser(bytes.NewReader(out)),
		ContentLength: int64(len(out)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// TestMCPOnMoto is /mcp on the Lambda path: the official Go SDK client
// talks to the api function's proxy handler; tools/list lists the enabled
// flow with an inputSchema, and tools/call queues its run, which the runner
// function executes from SQS while the api function watches it, and
// answers its RESPOND body. A viewer's key lists but may not call.
func TestMCPOnMoto(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newMotoStage(t, "mcp", awsapp.Config{Stage: "test", LogOutput: io.Discard})
	awsCfg, cfg, key := st.AWS, st.Cfg, st.Key
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rest := func(method, path, body string, want int, out any) {
		t.Helper()
		resp, err := api(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			RequestContext:    events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var f struct{ ID string }
	rest("POST", "/api/v1/flows", `{"name": "Quote price", "engine": "FLOW_BUILDER", "description": "Prices a quantity.",
		"trigger": {"type": "WEBHOOK", "inputSchema": {"type": "object", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]}},
		"steps": [{"name": "answer", "type": "RESPOND", "body": {"total": "{{ trigger.body.qty * 3 }}", "caller": "{{ trigger.caller }}"}}]}`, 201, &f)
	rest("POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	rest("POST", "/api/v1/flows", `{"name": "Not a tool", "engine": "FLOW_BUILDER",
		"steps": [{"name": "answer", "type": "RESPOND", "body": {}}]}`, 201, nil)

	// The runner function, as SQS would invoke it, until the test ends.
	sqsc := sqs.NewFromConfig(awsCfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = awsdev.PollOnce(ctx, sqsc, cfg.QueueURL, time.Second, runner)
		}
	}()
	defer wg.Wait()
	defer cancel()

	connect := func(key string) *mcp.ClientSession {
		t.Helper()
		hc := &http.Client{Transport: authed{key, proxyTransport{api}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "moto", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: "https://api.example.com/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs := connect(key)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "quote_price" || list.Tools[0].Description != "Prices a quantity." {
		t.Fatalf("tools/list = %+v, want quote_price alone", list.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "quote_price", Arguments: map[string]any{"qty": 4}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(got) != `{"caller":{"mcp":true},"total":12}` {
		t.Fatalf("tools/call: isError %v, structuredContent %s, content %+v", res.IsError, got, res.Content)
	}

	var project struct{ ID string }
	rest("GET", "/api/v1/project", "", 200, &project)
	admin, err := awsdev.NewAdminService(st.AWS, st.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	viewerKey, _, err := admin.CreateAPIKeyWithRole(ctx, project.ID, automation.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	viewer := connect(viewerKey)
	res, err = viewer.CallTool(ctx, &mcp.CallToolParams{Name: "quote_price", Arguments: map[string]any{"qty": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !res.IsError || !ok || !strings.Contains(tc.Text, "viewer") {
		t.Errorf("viewer's call: isError %v, %+v; want a refusal naming the role", res.IsError, res.Content)
	}
}

type authed struct {
	key  string
	next http.RoundTripper
}

func (a authed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.key)
	return a.next.RoundTrip(r)
}
