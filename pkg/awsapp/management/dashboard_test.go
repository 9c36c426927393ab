package management

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/flowtest"
)

// TestAPIHandlerServesDashboard calls the api function's handler as API
// Gateway does, on a stage: the dashboard answers under /ui/ with the stage
// in its links and cookie path, and Secure cookies; the API still answers
// everything else.
func TestAPIHandlerServesDashboard(t *testing.T) {
	ctx := context.Background()
	env := flowtest.New(t, flowtest.Options{})
	h := httpadapter.New(Handler(&awsapp.App{Svc: env.Svc, Log: slog.New(slog.DiscardHandler), CursorKey: env.Dir.CursorKey})).ProxyWithContext
	req := func(path string) events.APIGatewayProxyRequest {
		return events.APIGatewayProxyRequest{
			HTTPMethod: "GET", Path: path,
			RequestContext: events.APIGatewayProxyRequestContext{RequestID: "req-1", Stage: "prod", Path: "/prod" + path},
		}
	}

	resp, err := h(ctx, req("/ui/signin"))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `action="/prod/ui/signin"`) {
		t.Fatalf("GET /ui/signin = %d %v: %s", resp.StatusCode, err, resp.Body)
	}
	cookie := strings.Join(resp.MultiValueHeaders["Set-Cookie"], "\n") + resp.Headers["Set-Cookie"]
	if !strings.Contains(cookie, "Path=/prod/ui") || !strings.Contains(cookie, "Secure") || !strings.Contains(cookie, "HttpOnly") {
		t.Errorf("sign-in cookie %q: want Path=/prod/ui, Secure, HttpOnly", cookie)
	}

	resp, err = h(ctx, req("/ui/flows"))
	loc := resp.Headers["Location"]
	if loc == "" && len(resp.MultiValueHeaders["Location"]) > 0 {
		loc = resp.MultiValueHeaders["Location"][0]
	}
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/prod/ui/signin") {
		t.Errorf("GET /ui/flows without a session = %d %v, Location %q", resp.StatusCode, err, loc)
	}

	root := req("/")
	root.Headers = map[string]string{"Accept": "text/html,application/xhtml+xml"}
	resp, err = h(ctx, root)
	loc = resp.Headers["Location"]
	if loc == "" && len(resp.MultiValueHeaders["Location"]) > 0 {
		loc = resp.MultiValueHeaders["Location"][0]
	}
	if err != nil || resp.StatusCode != http.StatusFound || loc != "/prod/ui/" {
		t.Errorf("browser GET / = %d %v, Location %q; want 302 to /prod/ui/", resp.StatusCode, err, loc)
	}

	resp, err = h(ctx, req("/api/v1/openapi.json"))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"openapi"`) {
		t.Errorf("GET /api/v1/openapi.json = %d %v", resp.StatusCode, err)
	}
}
