package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// plainCall sends a request without the OpenAPI check: the document cannot
// express multi-segment webhook paths.
func plainCall(t *testing.T, method, url, contentType, body string) result {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestPathParameters: users/:id/orders answers users/42/orders with
// trigger.params.id = "42"; a literal path wins per method; patterns that
// can match one URL are a 409 at save time; PATCH and HEAD are methods.
func TestPathParameters(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	sync := `,"responseMode":"ON_COMPLETION"`
	byID := h.activeFlow(t, h.key, workflowFlow("users/:id/orders", "GET", sync,
		`[{"name":"r","type":"RESPOND","body":{"id":"{{ trigger.params.id }}","path":"{{ trigger.path }}"}}]`))
	h.activeFlow(t, h.key, workflowFlow("users/me/orders", "GET", sync,
		`[{"name":"r","type":"RESPOND","body":{"me":true}}]`))
	h.activeFlow(t, h.key, workflowFlow("users/:id/orders", "POST", sync,
		`[{"name":"r","type":"RESPOND","statusCode":201,"body":"created for {{ trigger.params.id }}"}]`))
	h.activeFlow(t, h.key, workflowFlow("items/:sku", "PATCH", sync,
		`[{"name":"r","type":"RESPOND","body":{"sku":"{{ trigger.params.sku }}","qty":"{{ trigger.body.qty }}"}}]`))
	h.activeFlow(t, h.key, workflowFlow("ping", "HEAD", sync, `[{"name":"r","type":"RESPOND","headers":{"X-Alive":"yes"}}]`))

	base := h.workflow.URL + "/webhook/"
	r := plainCall(t, "GET", base+"users/42/orders", "", "")
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"id":"42","path":"/webhook/users/42/orders"}` {
		t.Errorf("GET users/42/orders = %d %s", r.status, r.body)
	}
	r = plainCall(t, "GET", base+"users/me/orders", "", "")
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"me":true}` {
		t.Errorf("literal path: %d %s", r.status, r.body)
	}
	// The literal path has no POST: the parameter path's POST answers.
	r = plainCall(t, "POST", base+"users/me/orders", "application/json", `{}`)
	if r.status != 201 || string(r.body) != "created for me" {
		t.Errorf("POST users/me/orders = %d %s", r.status, r.body)
	}
	r = plainCall(t, "DELETE", base+"users/42/orders", "", "")
	if r.status != 405 || r.header.Get("Allow") != "GET, POST" {
		t.Errorf("DELETE = %d, Allow %q", r.status, r.header.Get("Allow"))
	}
	// A shape is never a URL: ":" is outside the request path alphabet.
	for _, p := range []string{"users/42", "users/42/orders/x", "people/42/orders", "users/:/orders", "users/:id/orders"} {
		if r := plainCall(t, "GET", base+p, "", ""); r.status != 404 {
			t.Errorf("GET %s = %d, want 404", p, r.status)
		}
	}
	r = plainCall(t, "PATCH", base+"items/sku-9", "application/json", `{"qty":3}`)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"qty":3,"sku":"sku-9"}` {
		t.Errorf("PATCH = %d %s", r.status, r.body)
	}
	r = plainCall(t, "HEAD", base+"ping", "", "")
	if r.status != 200 || r.header.Get("X-Alive") != "yes" || len(r.body) != 0 {
		t.Errorf("HEAD = %d %v %q", r.status, r.header, r.body)
	}

	// The Test Trigger URL matches parameters too.
	call(t, h.api, "POST", "/api/v1/flows/"+byID+"/webhook/test", h.key, "")
	r = plainCall(t, "GET", h.workflow.URL+"/webhook-test/users/5/orders", "", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"id":"5"`) {
		t.Errorf("test URL: %d %s", r.status, r.body)
	}

	// Save time: the same shape and method, an overlapping shape, bad
	// parameters.
	for _, tt := range []struct{ path, method string }{
		{"users/:name/orders", "GET"},
		{":org/42/orders", "PUT"},
	} {
		call(t, h.api, "POST", "/api/v1/flows", h.key, workflowFlow(tt.path, tt.method, "", "")).wantError(t, 409, "ROUTE_CONFLICT")
	}
	for _, p := range []string{"users/:id/:id", "users/:1x", ":a/:b", "users/:id-x"} {
		call(t, h.api, "POST", "/api/v1/flows", h.key, workflowFlow(p, "GET", "", "")).wantError(t, 400, "")
	}
	// Same shape, another method: one path.
	createFlow(t, h.api, h.key, workflowFlow("users/:name/orders", "PUT", "", ""))
}
