package deploy

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
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

// TestBodyTypesOnLambda: API Gateway, with BinaryMediaTypes "*/*" as in
// template.yaml, passes every body base64 with isBase64Encoded; each body
// type reaches the run of the workflow hook Lambda intact (a path
// parameter too), a signature is verified on the raw bytes, and a
// redelivery with the same body ID gets the first run.
func TestBodyTypesOnLambda(t *testing.T) {
	st := newStack(t)
	h := workflowHook(t, st)
	f := st.flow(t, `{"name": "Intake", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "ANY", "path": "intake/:source",
			"signature": {"header": "X-Sig", "prefix": "sha256=", "secret": "s3cret"}}},
		"steps": [{"name": "s", "type": "SET", "values": {"source": "{{ trigger.params.source }}"}}]}`, true)

	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("name", "Ada")
	fw, _ := mw.CreateFormFile("upload", "blob.bin")
	_, _ = fw.Write(bin)
	_ = mw.Close()

	tests := []struct {
		name, method, contentType string
		body                      []byte
		base64                    bool
		check                     func(t *testing.T, td automation.TriggerData)
	}{
		{"json", "POST", "application/json", []byte(`{"a":[1,2]}`), true, func(t *testing.T, td automation.TriggerData) {
			if string(td.Body) != `{"a":[1,2]}` {
				t.Errorf("body %s", td.Body)
			}
		}},
		{"json as text", "PUT", "application/json", []byte(`{"a":1}`), false, func(t *testing.T, td automation.TriggerData) {
			if string(td.Body) != `{"a":1}` {
				t.Errorf("body %s", td.Body)
			}
		}},
		{"form", "POST", "application/x-www-form-urlencoded", []byte("a=1&b=2&b=3"), true, func(t *testing.T, td automation.TriggerData) {
			if string(td.Body) != `{"a":"1","b":["2","3"]}` {
				t.Errorf("body %s", td.Body)
			}
		}},
		{"multipart", "POST", mw.FormDataContentType(), form.Bytes(), true, func(t *testing.T, td automation.TriggerData) {
			if string(td.Body) != `{"name":"Ada"}` || len(td.Files) != 1 || td.Files[0].Size != 256 ||
				td.Files[0].Base64 != base64.StdEncoding.EncodeToString(bin) || td.Files[0].Filename != "blob.bin" {
				t.Errorf("body %s, files %+v", td.Body, td.Files)
			}
		}},
		{"xml", "PATCH", "application/xml", []byte(`<a>é</a>`), true, func(t *testing.T, td automation.TriggerData) {
			var s string
			if err := json.Unmarshal(td.Body, &s); err != nil || s != `<a>é</a>` {
				t.Errorf("body %s", td.Body)
			}
		}},
		{"binary", "POST", "application/octet-stream", bin, true, func(t *testing.T, td automation.TriggerData) {
			if string(td.Body) != `null` || td.BodyBase64 != base64.StdEncoding.EncodeToString(bin) {
				t.Errorf("body %s, bodyBase64 %q", td.Body, td.BodyBase64)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": tt.contentType, "X-Sig": "sha256=" + hmacHex("s3cret", tt.body)}
			resp := invoke(t, h, proxyEvent(t, tt.method, "/webhook/intake/github", hdr, tt.body, tt.base64))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			runID := header(resp, "X-Run-Id")
			run, err := st.store.Run(context.Background(), st.project.ID, f.ID, runID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Trigger.Params["source"] != "github" || run.Trigger.Method != tt.method {
				t.Errorf("params %v, method %s", run.Trigger.Params, run.Trigger.Method)
			}
			tt.check(t, run.Trigger)
		})
	}
	// A signature over other bytes is refused.
	hdr := map[string]string{"Content-Type": "application/octet-stream", "X-Sig": "sha256=" + hmacHex("s3cret", []byte("x"))}
	if resp := invoke(t, h, proxyEvent(t, "POST", "/webhook/intake/github", hdr, bin, true)); resp.StatusCode != 401 {
		t.Errorf("bad signature: %d %s", resp.StatusCode, resp.Body)
	}

	// Stripe-style dedup by body ID on the flow builder Lambda.
	wh, err := awsapp.NewWebhookHandler(context.Background(), st.aws, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	fb := st.flow(t, `{"name": "Stripe", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"idempotencyKey": "trigger.body.id"}},
		"steps": [{"name": "s", "type": "SET", "values": {"evt": "{{ trigger.body.id }}"}}]}`, true)
	evt := []byte(`{"id":"evt_123","type":"invoice.paid"}`)
	ev := proxyEvent(t, "POST", "/api/v1/webhooks/"+fb.ID, map[string]string{"Content-Type": "application/json"}, evt, true)
	first, again := invoke(t, wh, ev), invoke(t, wh, ev)
	if first.StatusCode != 200 || header(first, "X-Run-Id") == "" || header(again, "X-Run-Id") != header(first, "X-Run-Id") {
		t.Errorf("dedup: %d %s / %d %s", first.StatusCode, header(first, "X-Run-Id"), again.StatusCode, header(again, "X-Run-Id"))
	}
	// Two deliveries of a new event at once, as two Lambda instances would
	// take them: one run.
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(proxyEvent(t, "POST", "/api/v1/webhooks/"+fb.ID,
		map[string]string{"Content-Type": "application/json"}, []byte(`{"id":"evt_456"}`), true), &req); err != nil {
		t.Fatal(err)
	}
	answers := make([]events.APIGatewayProxyResponse, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = wh(context.Background(), req)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || answers[0].StatusCode != 200 || answers[1].StatusCode != 200 ||
		header(answers[0], "X-Run-Id") != header(answers[1], "X-Run-Id") || header(answers[0], "X-Run-Id") == header(first, "X-Run-Id") {
		t.Errorf("concurrent deliveries: %v %v, runs %q %q", errs, []int{answers[0].StatusCode, answers[1].StatusCode},
			header(answers[0], "X-Run-Id"), header(answers[1], "X-Run-Id"))
	}
	ev = proxyEvent(t, "POST", "/api/v1/webhooks/"+fb.ID, map[string]string{"Content-Type": "text/plain"}, evt, true)
	if resp := invoke(t, wh, ev); resp.StatusCode != 200 {
		t.Errorf("text to the flow builder: %d %s, want 200 (it reads every body type)", resp.StatusCode, resp.Body)
	}
}

func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
