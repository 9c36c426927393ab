package awsapp

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/awstest"
	"flowservice/pkg/emf"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFrom(t *testing.T) {
	c, err := ConfigFrom(env(map[string]string{
		"TABLE_FLOWS": "flow-dev-flows", "QUEUE_URL": "https://sqs/q", "SECRET_PREFIX": "flow/dev",
		"ALLOWED_CIDRS": "192.0.2.0/24, 2001:db8::/32,198.51.100.7", "MAX_BODY_BYTES": "4000000",
		"SYNC_TIMEOUT": "25s", "RUN_TIMEOUT": "300s", "RUN_ATTEMPTS": "5", "LOG_LEVEL": "debug",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("198.51.100.7/32")}
	if !slices.Equal(c.AllowedCIDRs, want) {
		t.Errorf("AllowedCIDRs = %v, want %v", c.AllowedCIDRs, want)
	}
	type settings struct {
		FlowsTable              string
		MaxBody                 int64
		SyncTimeout, RunTimeout time.Duration
		RunAttempts             int
		LogLevel                slog.Level
	}
	got := settings{c.Tables.Flows, c.MaxBody, c.SyncTimeout, c.RunPolicy.Timeout, c.RunPolicy.MaxAttempts, c.LogLevel}
	wantSettings := settings{"flow-dev-flows", 4_000_000, 25 * time.Second, 300 * time.Second, 5, slog.LevelDebug}
	if diff := cmp.Diff(wantSettings, got); diff != "" {
		t.Errorf("config mismatch (-want +got):\n%s", diff)
	}

	// An MCP call waits 25 s by default, less when MCP_WAIT says so.
	if c, err := ConfigFrom(env(map[string]string{})); err != nil || c.mcpWait() != 25*time.Second {
		t.Errorf("no MCP_WAIT: wait %v (%v), want 25s", c.mcpWait(), err)
	}
	if c, err := ConfigFrom(env(map[string]string{"MCP_WAIT": "10s"})); err != nil || c.mcpWait() != 10*time.Second {
		t.Errorf("MCP_WAIT=10s: wait %v (%v)", c.mcpWait(), err)
	}

	// The template's RunRetentionDays, which the payload bucket's
	// lifecycle follows too, is the runs' retention.
	if c, err := ConfigFrom(env(map[string]string{"RUN_RETENTION_DAYS": "90"})); err != nil || c.RunPolicy.Retention != 90*24*time.Hour {
		t.Errorf("RUN_RETENTION_DAYS=90: retention %v (%v)", c.RunPolicy.Retention, err)
	}
	if _, err := ConfigFrom(env(map[string]string{"RUN_RETENTION_DAYS": "90", "RUN_RETENTION": "720h"})); err == nil {
		t.Error("RUN_RETENTION and RUN_RETENTION_DAYS disagreeing were taken")
	}

	bad := []struct{ k, v, want string }{
		{"ALLOWED_CIDRS", "10.0.0.0/8,nonsense", "neither an address nor a CIDR"},
		{"MAX_BODY_BYTES", "6000000", "Lambda proxy event"},
		{"SYNC_TIMEOUT", "26s", "29 s"},
		{"MCP_WAIT", "26s", "29 s"},
		{"RUN_TIMEOUT", "five minutes", "duration"},
		{"LOG_LEVEL", "loud", "LOG_LEVEL"},
		{"ALLOW_PRIVATE_NETWORKS", "maybe", "true or false"},
		{"RUN_RETENTION_DAYS", "0", "whole days"},
	}
	for _, b := range bad {
		if _, err := ConfigFrom(env(map[string]string{b.k: b.v})); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s=%s: err %v, want one saying %q", b.k, b.v, err, b.want)
		}
	}
}

// TestSourceIP reads API Gateway's sourceIp through the proxy adapter, and
// refuses requests outside the platform ranges.
func TestSourceIP(t *testing.T) {
	var seen netip.Addr
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = SourceIP(r)
		w.WriteHeader(http.StatusNoContent)
	})
	h := httpadapter.New(platformAllowlist([]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, inner)).ProxyWithContext
	req := func(ip string) events.APIGatewayProxyRequest {
		return events.APIGatewayProxyRequest{
			HTTPMethod: "POST", Path: "/api/v1/webhooks/flw_x",
			Headers: map[string]string{"X-Forwarded-For": "198.51.100.1"},
			RequestContext: events.APIGatewayProxyRequestContext{
				RequestID: "req-1", Identity: events.APIGatewayRequestIdentity{SourceIP: ip},
			},
		}
	}
	resp, err := h(context.Background(), req("198.51.100.10"))
	if err != nil || resp.StatusCode != 204 || seen != netip.MustParseAddr("198.51.100.10") {
		t.Errorf("allowed address: %d %v, handler saw %v", resp.StatusCode, err, seen)
	}
	seen = netip.Addr{}
	resp, err = h(context.Background(), req("203.0.113.9"))
	if err != nil || resp.StatusCode != 403 || !strings.Contains(resp.Body, `"IP_NOT_ALLOWED"`) || !strings.Contains(resp.Body, "req-1") || seen.IsValid() {
		t.Errorf("outside address: %d %s %v (handler saw %v), want 403 before the handler", resp.StatusCode, resp.Body, err, seen)
	}
	if _, ok := SourceIP(&http.Request{}); ok {
		t.Error("a request not from API Gateway has a source IP")
	}
}

// TestProxyHead: a HEAD answer through the proxy adapter carries no body,
// base64 or not, and says the length of the one GET gets, as flowd's
// net/http server does; a length the handler set stands, and GET is as
// the handler wrote it.
func TestProxyHead(t *testing.T) {
	a := &App{metrics: emf.New(io.Discard, "test")}
	binary := []byte{0xff, 0xfe, 0x00, 0x01, 0x80}
	h := a.Proxy("test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(binary)
		case "/sized":
			w.Header().Set("Content-Length", "42")
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("short"))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}
	}))
	call := func(method, path string) events.APIGatewayProxyResponse {
		t.Helper()
		resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: method, Path: path})
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	tests := []struct {
		method, path, wantLength string
		wantStatus               int
	}{
		{"HEAD", "/json", "12", 200},
		{"head", "/json", "12", 200},
		{"HEAD", "/binary", "5", 200},
		{"HEAD", "/sized", "42", 200},
		{"HEAD", "/empty", "", 204},
	}
	for _, tt := range tests {
		resp := call(tt.method, tt.path)
		cl := http.Header(resp.MultiValueHeaders).Get("Content-Length")
		if resp.StatusCode != tt.wantStatus || resp.Body != "" || resp.IsBase64Encoded || cl != tt.wantLength {
			t.Errorf("%s %s = %d body %q base64 %v Content-Length %q; want %d, no body, Content-Length %q",
				tt.method, tt.path, resp.StatusCode, resp.Body, resp.IsBase64Encoded, cl, tt.wantStatus, tt.wantLength)
		}
		if n := len(resp.MultiValueHeaders["Content-Length"]); n > 1 {
			t.Errorf("%s %s: %d Content-Length headers", tt.method, tt.path, n)
		}
	}
	if resp := call("HEAD", "/binary"); http.Header(resp.MultiValueHeaders).Get("Content-Type") != "application/octet-stream" {
		t.Errorf("HEAD /binary Content-Type %q", http.Header(resp.MultiValueHeaders).Get("Content-Type"))
	}
	get := call("GET", "/binary")
	if !get.IsBase64Encoded || get.Body != "//4AAYA=" || http.Header(get.MultiValueHeaders).Get("Content-Length") != "" {
		t.Errorf("GET /binary = body %q base64 %v headers %v; want the body untouched", get.Body, get.IsBase64Encoded, get.MultiValueHeaders)
	}
	if get := call("GET", "/json"); get.Body != `{"ok":true}`+"\n" {
		t.Errorf("GET /json body %q", get.Body)
	}
}

// TestConfigFromOIDC reads the template's Oidc* parameters as the api
// function gets them, and refuses what could never sign anybody in.
func TestConfigFromOIDC(t *testing.T) {
	arn := "arn:aws:secretsmanager:us-east-1:123456789012:secret:flow-dev-oidc-AbCdEf"
	c, err := ConfigFrom(env(map[string]string{
		"OIDC_ISSUER": "https://login.example.com/", "OIDC_CLIENT_ID": "flows", "OIDC_CLIENT_SECRET_ARN": arn,
		"OIDC_ALLOWED_DOMAINS": " Example.com, corp.example.org ,", "OIDC_VIEWER_PROJECT": "acme",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := OIDCConfig{Issuer: "https://login.example.com/", ClientID: "flows", ClientSecretARN: arn,
		AllowedDomains: []string{"example.com", "corp.example.org"}, ViewerProject: "acme"}
	if diff := cmp.Diff(want, c.OIDC); diff != "" || !c.OIDC.Enabled() {
		t.Errorf("OIDC mismatch (-want +got):\n%s", diff)
	}

	// Off: the template passes the parameters' empty defaults.
	if c, err := ConfigFrom(env(map[string]string{"OIDC_ISSUER": "", "OIDC_CLIENT_ID": "", "OIDC_ALLOWED_DOMAINS": ""})); err != nil || c.OIDC.Enabled() {
		t.Errorf("no issuer: OIDC %+v, %v; want off", c.OIDC, err)
	}
	// The viewer project defaults as flowd's does.
	if c, err := ConfigFrom(env(map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_CLIENT_ID": "x", "OIDC_CLIENT_SECRET_ARN": arn})); err != nil || c.OIDC.ViewerProject != "default" {
		t.Errorf("no viewer project: %q, %v; want default", c.OIDC.ViewerProject, err)
	}

	on := map[string]string{"OIDC_ISSUER": "https://id.example", "OIDC_CLIENT_ID": "flows", "OIDC_CLIENT_SECRET_ARN": arn}
	bad := []struct{ k, v, want string }{
		{"OIDC_ISSUER", "id.example", "issuer URL"},
		{"OIDC_ISSUER", "ftp://id.example", "issuer URL"},
		{"OIDC_CLIENT_ID", "", "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET_ARN"},
		{"OIDC_CLIENT_SECRET_ARN", "", "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET_ARN"},
		{"OIDC_CLIENT_SECRET_ARN", "s3cret", "Secrets Manager secret's ARN"}, // the secret itself, not its ARN
		{"OIDC_ALLOWED_DOMAINS", "example.com,@corp.example", "not an email domain"},
		{"OIDC_ALLOWED_DOMAINS", "localhost", "not an email domain"},
	}
	for _, b := range bad {
		e := maps.Clone(on)
		e[b.k] = b.v
		if _, err := ConfigFrom(env(e)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s=%q: err %v, want one saying %q", b.k, b.v, err, b.want)
		}
	}
	if _, err := ConfigFrom(env(map[string]string{"OIDC_CLIENT_ID": "flows"})); err == nil || !strings.Contains(err.Error(), "without OIDC_ISSUER") {
		t.Errorf("a client ID without an issuer: %v, want refused", err)
	}
}
