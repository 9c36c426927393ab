package deploy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/awsapp"
)

// proxyEvent is an API Gateway REST proxy event for the workflow builder
// receiver, built on events/workflowhook-post.json (what API Gateway
// sends): method, path under /webhook/, query, headers and body replaced.
// A binary body arrives as API Gateway passes it when its media type is in
// the API's BinaryMediaTypes: base64, with isBase64Encoded.
func proxyEvent(t *testing.T, method, target string, hdr map[string]string, body []byte, binary bool) []byte {
	t.Helper()
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(event(t, "workflowhook-post.json", nil), &req); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	req.HTTPMethod, req.RequestContext.HTTPMethod = method, method
	req.Path = u.Path
	req.RequestContext.Path = "/dev" + u.Path
	req.PathParameters = map[string]string{"proxy": strings.TrimPrefix(u.Path, "/")}
	req.QueryStringParameters, req.MultiValueQueryStringParameters = nil, nil
	if q := u.Query(); len(q) > 0 {
		req.QueryStringParameters = map[string]string{}
		req.MultiValueQueryStringParameters = map[string][]string{}
		for k, vs := range q {
			req.QueryStringParameters[k] = vs[len(vs)-1]
			req.MultiValueQueryStringParameters[k] = vs
		}
	}
	delete(req.Headers, "Content-Type")
	delete(req.MultiValueHeaders, "Content-Type")
	delete(req.Headers, "X-GitHub-Event")
	delete(req.MultiValueHeaders, "X-GitHub-Event")
	for k, v := range hdr {
		req.Headers[k] = v
		req.MultiValueHeaders[k] = []string{v}
	}
	req.Body, req.IsBase64Encoded = string(body), false
	if binary {
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// responseBody is the answer's body bytes, decoded when the adapter sent
// them base64.
func responseBody(t *testing.T, resp events.APIGatewayProxyResponse) []byte {
	t.Helper()
	if !resp.IsBase64Encoded {
		return []byte(resp.Body)
	}
	b, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil {
		t.Fatalf("base64 body: %v", err)
	}
	return b
}

func workflowHook(t *testing.T, st *stack) awsapp.ProxyHandler {
	t.Helper()
	h, err := awsapp.NewWorkflowHookHandler(context.Background(), st.aws, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRespondOnLambda: a RESPOND step's status, headers, content type and
// text or JSON body come out of the workflow hook Lambda as proxy response
// fields.
func TestRespondOnLambda(t *testing.T) {
	st := newStack(t)
	h := workflowHook(t, st)
	st.flow(t, `{"name": "Slack events", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "slack/events", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "challenge", "type": "RESPOND", "body": "{{ trigger.body.challenge }}"}]}`, true)
	st.flow(t, `{"name": "Custom", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "custom", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "reply", "type": "RESPOND", "statusCode": 202, "headers": {"X-Order": "{{ trigger.body.id }}"},
			"contentType": "application/vnd.api+json", "body": {"data": [{"id": "{{ trigger.body.id }}"}]}}]}`, true)

	resp := invoke(t, h, proxyEvent(t, "POST", "/webhook/slack/events", map[string]string{"Content-Type": "application/json"},
		[]byte(`{"type":"url_verification","challenge":"c-123"}`), false))
	if resp.StatusCode != 200 || string(responseBody(t, resp)) != "c-123" || header(resp, "Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("challenge: %d %q %v", resp.StatusCode, resp.Body, resp.MultiValueHeaders)
	}
	resp = invoke(t, h, proxyEvent(t, "POST", "/webhook/custom", map[string]string{"Content-Type": "application/json"},
		[]byte(`{"id":"o-9"}`), false))
	if resp.StatusCode != 202 || string(responseBody(t, resp)) != `{"data":[{"id":"o-9"}]}`+"\n" ||
		header(resp, "X-Order") != "o-9" || header(resp, "Content-Type") != "application/vnd.api+json" || header(resp, "X-Run-Id") == "" {
		t.Errorf("custom: %d %q %v", resp.StatusCode, resp.Body, resp.MultiValueHeaders)
	}
	_ = http.MethodPost
}
