package httpapi

// The document is validated with github.com/getkin/kin-openapi: since
// v0.150 it handles OpenAPI 3.1 (JSON Schema 2020-12 through
// santhosh-tekuri/jsonschema, type arrays such as ["string", "null"]), it
// checks requests and responses against one operation, and its few
// dependencies are on the module proxy. pb33f/libopenapi-validator, the
// other 3.1 validator, needs modules the proxy does not serve.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec parses and validates the embedded document once per test binary.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(openAPIDocument())
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		specRouter, specErr = gorillamux.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("openapi.json: %v", specErr)
	}
	return specDoc, specRouter
}

// validatingTransport checks every exchange of a test client against the
// document: a request the document allows must get a documented response; a
// request the document forbids must be refused with a 4xx; a route the
// document lacks must be 404 or 405 with the error envelope.
type validatingTransport struct {
	t    *testing.T
	next http.RoundTripper
}

func newValidatingTransport(t *testing.T, next http.RoundTripper) http.RoundTripper {
	loadSpec(t)
	return &validatingTransport{t: t, next: next}
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))

	check := req.Clone(context.Background())
	check.Body = io.NopCloser(bytes.NewReader(reqBody))
	if err := checkExchange(check, resp, respBody); err != nil {
		v.t.Errorf("%s %s -> %d: does not match openapi.json: %v\nresponse: %s", req.Method, req.URL.RequestURI(), resp.StatusCode, err, clipBytes(respBody))
	}
	return resp, nil
}

func clipBytes(b []byte) string {
	if len(b) > 500 {
		return string(b[:500]) + "…"
	}
	return string(b)
}

// checkExchange validates one request and its response.
func checkExchange(req *http.Request, resp *http.Response, body []byte) error {
	doc, router := specDoc, specRouter
	if resp.Header.Get("X-Request-Id") == "" {
		return errors.New("no X-Request-Id header")
	}
	route, params, err := router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") == "" {
			return errors.New("a method the document lacks must be 405 with Allow")
		}
		return checkError(doc, body)
	case errors.Is(err, routers.ErrPathNotFound):
		if resp.StatusCode != http.StatusNotFound {
			return errors.New("a path the document lacks must be 404")
		}
		return checkError(doc, body)
	case err != nil:
		return err
	}
	reqIn := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: checkBearer},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), reqIn); err != nil {
		if resp.StatusCode < 400 || resp.StatusCode > 499 {
			return errors.Join(errors.New("the document forbids this request, but it was not refused with a 4xx"), err)
		}
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			// Every status must be listed: no fallback to a default response.
			// writeOnly is enforced: fields that come back masked
			// ("********") are not writeOnly in the document, so a field
			// that is must never appear in a response.
			IncludeResponseStatus: true,
		},
	})
}

// checkBearer is the document's bearerAuth: the header must be present with
// the Bearer scheme; whether the key is valid is the server's business.
func checkBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, key, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return errors.New("no bearer key")
	}
	return nil
}

// checkError validates body against the Error schema.
func checkError(doc *openapi3.T, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

// TestOpenAPIDocument checks that the document is valid OpenAPI 3.1, is
// served without a key, and describes every route the API serves.
func TestOpenAPIDocument(t *testing.T) {
	doc, _ := loadSpec(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	a := NewAPI(nil, nil).(*API)
	for _, rt := range a.routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s is not in openapi.json", rt.pattern)
		}
	}
	n := 0
	receivers := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			// The receivers are documented under their own servers.
			if len(item.Servers) > 0 {
				receivers[method+" "+path] = true
				continue
			}
			n++
			if !a.patterns[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which the API does not serve", method, path)
			}
		}
	}
	wantReceivers := []string{"POST /api/v1/webhooks/{flowId}", "GET /webhook/{path}", "POST /webhook/{path}",
		"PUT /webhook/{path}", "PATCH /webhook/{path}", "DELETE /webhook/{path}", "HEAD /webhook/{path}",
		"OPTIONS /webhook/{path}", "GET /webhook-test/{path}", "POST /webhook-test/{path}", "PUT /webhook-test/{path}",
		"PATCH /webhook-test/{path}", "DELETE /webhook-test/{path}", "HEAD /webhook-test/{path}", "OPTIONS /webhook-test/{path}"}
	for _, op := range wantReceivers {
		if !receivers[op] {
			t.Errorf("openapi.json lacks the receiver operation %s", op)
		}
	}
	if len(receivers) != len(wantReceivers) {
		t.Errorf("openapi.json has %d receiver operations, want %d", len(receivers), len(wantReceivers))
	}
	if n != len(a.routes()) {
		t.Errorf("openapi.json has %d operations, the API %d routes", n, len(a.routes()))
	}

	srv, _ := newTestServer(t)
	resp, err := srv.Client().Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, openAPIDocument()) {
		t.Errorf("GET openapi.json = %d, %d bytes; want 200 with the embedded document", resp.StatusCode, len(got))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}
