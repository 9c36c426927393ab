package awsapp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"flowservice/internal/dbtest"
	"flowservice/internal/smtptest"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
	"flowservice/pkg/oauth"
	"flowservice/pkg/oauth/oauthtest"
	"flowservice/pkg/smsecrets"
	"flowservice/pkg/tracing"
)

// otlpCollector is an OTLP/HTTP trace receiver on 127.0.0.1 that decodes
// each export with the official protobuf types and keeps the bytes.
type otlpCollector struct {
	url   string
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.raw = append(c.raw, b)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// named returns the spans exported so far with that name.
func (c *otlpCollector) named(name string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (c *otlpCollector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		out = append(out, s.Name)
	}
	return out
}

// runSpan is the exported span of run id, nil before it is.
func (c *otlpCollector) runSpan(id string) *tracepb.Span {
	for _, s := range c.named("run") {
		for _, kv := range s.Attributes {
			if kv.Key == "flow.run.id" && kv.Value.GetStringValue() == id {
				return s
			}
		}
	}
	return nil
}

// under returns the spans named name whose parent is parent.
func (c *otlpCollector) under(name string, parent *tracepb.Span) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range c.named(name) {
		if bytes.Equal(s.TraceId, parent.TraceId) && bytes.Equal(s.ParentSpanId, parent.SpanId) {
			out = append(out, s)
		}
	}
	return out
}

func (c *otlpCollector) leaks(secrets ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range secrets {
		for _, b := range c.raw {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// TestFunctionTracesOnMoto: the runner function, run on moto, exports
// before each invocation returns (no flush by the test) the spans of what
// its steps did: an OAuth2 refresh under the HTTP step that needed it, a
// SQL statement and an SMTP send under theirs, and, in a later
// invocation, the run of a CALL_FLOW child under the step that called it,
// all in the webhook caller's trace; no credential, token or parameter
// value is in any export.
func TestFunctionTracesOnMoto(t *testing.T) {
	ctx := context.Background()
	pgPort := dbtest.StartPostgres(t)
	mail := smtptest.Start(t, true)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: "http://127.0.0.1:9", AccessTokenExp: time.Second})
	t.Cleanup(idp.Close)
	col := newOTLPCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.url)
	tr, err := tracing.FromEnv(ctx, "flowservice-runner", nil)
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v", tr, err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tr.Shutdown(sctx)
	})

	st := newMotoStage(t, "traces", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true,
		RootCAs: mail.Pool, Tracer: tr})
	api, err := management.NewHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The OAuth2 connection is made as the dashboard makes it, by a
	// Service on the stage's tables and secrets with an OAuth2 client.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	store := dynamostore.New(dynamodb.NewFromConfig(st.AWS), st.Cfg.Tables)
	oauthSvc, err := automation.NewService(automation.Config{Store: store, OAuthApps: store, Polls: store, Users: store,
		Secrets: smsecrets.New(secretsmanager.NewFromConfig(st.AWS), st.Cfg.SecretPrefix), Checker: engine.Checker{},
		CursorKey: key, OAuth: oauth.New(http.DefaultTransport)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oauthSvc.AddOAuthApp(ctx, automation.OAuthAppInput{Name: "idp", ClientID: oauthtest.ClientID,
		ClientSecret: oauthtest.ClientSecret, AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	project, err := oauthSvc.ProjectByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:9/ui/oauth/callback"
	start, err := oauthSvc.StartOAuth(ctx, "idp", redirect)
	if err != nil {
		t.Fatal(err)
	}
	back, err := idp.Consent(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := oauthSvc.CompleteOAuth(ctx, project, automation.OAuthCompletion{App: "idp", RedirectURL: redirect,
		Code: back.Query().Get("code"), Verifier: start.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	exchanges := idp.TokenRequests()

	call := func(h awsapp.ProxyHandler, method, path, body string, headers map[string][]string, want int, out any) {
		t.Helper()
		mv := map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + st.Key}}
		for k, v := range headers {
			mv[k] = v
		}
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body, MultiValueHeaders: mv,
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	const dbPass, param = "db-pass-0b9e7d5c", "param-value-6a4c2e8f"
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "db", "app": "postgres", "type": "POSTGRES",
		"value": {"host": "127.0.0.1", "port": %d, "database": "postgres", "username": "postgres", "password": %q, "tls": "disable"}}`,
		pgPort, dbPass), nil, 201, nil)
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "mail", "app": "smtp", "type": "SMTP",
		"value": {"host": "127.0.0.1", "port": %d, "username": %q, "password": %q, "from": "flows@example.com"}}`,
		mail.Port, smtptest.User, smtptest.Password), nil, 201, nil)
	var child, parent struct{ ID string }
	call(api, "POST", "/api/v1/flows", `{"name": "child", "engine": "FLOW_BUILDER", "steps": [
		{"name": "inner", "type": "SET", "values": {"a": 1}}]}`, nil, 201, &child)
	call(api, "POST", "/api/v1/flows/"+child.ID+"/enable", "", nil, 200, nil)
	call(api, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "parent", "engine": "FLOW_BUILDER", "steps": [
		{"name": "me", "type": "HTTP", "method": "GET", "url": %q, "connectionId": %q},
		{"name": "q", "type": "SQL", "connection": "db", "query": "select upper($1) as v", "params": ["{{ trigger.body.param }}"]},
		{"name": "mail", "type": "EMAIL", "connection": "mail", "to": ["ada@example.com"], "subject": "Hi", "text": "{{ steps.q.rows[0].v }}"},
		{"name": "fire", "type": "CALL_FLOW", "flowId": %q, "wait": false}]}`, idp.ResourceURL, oc.ID, child.ID), nil, 201, &parent)
	call(api, "POST", "/api/v1/flows/"+parent.ID+"/enable", "", nil, 200, nil)

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	var accepted struct{ RunID string }
	call(hook, "POST", "/api/v1/webhooks/"+parent.ID, fmt.Sprintf(`{"param": %q}`, param),
		map[string][]string{"traceparent": {"00-" + callerTrace + "-00f067aa0ba902b7-01"}}, 200, &accepted)
	childID := automation.CallRunID(accepted.RunID, "fire", child.ID)

	// Each invocation leaves its spans at the collector: the test never
	// flushes the tracer itself.
	sqsc := sqs.NewFromConfig(st.AWS)
	for i := 0; i < 20 && (col.runSpan(accepted.RunID) == nil || col.runSpan(childID) == nil); i++ {
		if _, err := awsdev.PollOnce(ctx, sqsc, st.Cfg.QueueURL, time.Second, runner); err != nil {
			t.Fatal(err)
		}
	}
	run, kid := col.runSpan(accepted.RunID), col.runSpan(childID)
	if run == nil || kid == nil {
		t.Fatalf("run spans of the caller (%v) and of its child (%v) not exported after the invocations; spans: %v", run != nil, kid != nil, col.names())
	}
	if hex.EncodeToString(run.TraceId) != callerTrace {
		t.Errorf("run span in trace %x, want the webhook caller's %s", run.TraceId, callerTrace)
	}
	step := func(name string) *tracepb.Span {
		t.Helper()
		got := col.under("step "+name, run)
		if len(got) != 1 {
			t.Fatalf("%d spans of step %s under the run, want 1 (all: %v)", len(got), name, col.names())
		}
		return got[0]
	}
	if got := col.under("POST", step("me")); len(got) != 1 {
		t.Errorf("%d token request spans under the step that refreshed its token, want 1", len(got))
	} else if tps := idp.TokenTraceparents(); len(tps) <= exchanges ||
		tps[len(tps)-1] != "00-"+callerTrace+"-"+hex.EncodeToString(got[0].SpanId)+"-01" {
		t.Errorf("token requests carried traceparent %q, want the last one to name span %x", tps, got[0].SpanId)
	}
	if got := col.under("postgresql", step("q")); len(got) != 1 {
		t.Errorf("%d SQL spans under step q, want 1", len(got))
	}
	if got := col.under("smtp", step("mail")); len(got) != 1 {
		t.Errorf("%d SMTP spans under step mail, want 1", len(got))
	}
	if fire := step("fire"); !bytes.Equal(kid.TraceId, fire.TraceId) || !bytes.Equal(kid.ParentSpanId, fire.SpanId) {
		t.Errorf("child run span under %x in trace %x, want under step fire %x in the caller's trace", kid.ParentSpanId, kid.TraceId, fire.SpanId)
	}
	if len(col.under("step inner", kid)) != 1 {
		t.Errorf("the child's step is not under the child's run span (all: %v)", col.names())
	}
	col.mu.Lock()
	var size int
	for _, b := range col.raw {
		size += len(b)
	}
	t.Logf("%d spans in %d exports, %d bytes of OTLP protobuf (uncompressed)", len(col.spans), len(col.raw), size)
	col.mu.Unlock()
	secrets := append([]string{oauthtest.ClientSecret, dbPass, smtptest.Password, param, strings.ToUpper(param)}, idp.IssuedRefreshTokens()...)
	if leaked := col.leaks(secrets...); len(leaked) > 0 {
		t.Errorf("exported spans hold %q", leaked)
	}
}
