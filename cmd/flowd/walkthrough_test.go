package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"flowservice/pkg/httpapi"
)

// walkthroughDocs are the documents whose <!-- walkthrough --> section is a
// script a reader can paste: the README's five minutes, and the longer
// tours of the API guide and the flow language. Each starts from a fresh
// flowd, so each reads its own key and makes its own flows.
var walkthroughDocs = []string{"README.md", "docs/api.md", "docs/flows.md"}

// block is one shell block of a walkthrough.
type block struct {
	code        string
	expectError bool // marked <!-- expect-error -->: every curl in it gets an error envelope
}

// walkthrough extracts the shell blocks between <!-- walkthrough --> and
// <!-- /walkthrough --> in the document at path (from the repository root).
func walkthrough(t *testing.T, path string) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	start, end := strings.Index(s, "<!-- walkthrough -->"), strings.Index(s, "<!-- /walkthrough -->")
	if start < 0 || end < start {
		t.Fatalf("%s has no <!-- walkthrough --> … <!-- /walkthrough --> section", path)
	}
	re := regexp.MustCompile("(?s)(<!-- expect-error -->\\s*)?```sh\n(.*?)```")
	var out []block
	for _, m := range re.FindAllStringSubmatch(s[start:end], -1) {
		out = append(out, block{code: m[2], expectError: m[1] != ""})
	}
	if len(out) < 4 {
		t.Fatalf("%s: walkthrough has %d shell blocks; the section markers are probably off", path, len(out))
	}
	return out
}

// TestWalkthroughs runs each document's curl walkthrough, in order, in one
// shell against a freshly started flowd, as a newcomer would, and checks
// every response flowd gives against openapi.json on the way.
func TestWalkthroughs(t *testing.T) {
	t.Parallel() // each walkthrough has a flowd, a directory and ports of its own
	for _, doc := range walkthroughDocs {
		t.Run(strings.TrimSuffix(filepath.Base(doc), ".md"), func(t *testing.T) {
			t.Parallel()
			runWalkthrough(t, doc)
		})
	}
}

func runWalkthrough(t *testing.T, doc string) {
	work := t.TempDir()
	p := startFlowd(t, filepath.Join(work, ".flowd"))
	blocks := walkthrough(t, doc)
	proxy := newSpecProxy(t, p.base)
	// The blocks run from the repository root: they read examples/.
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}

	// One script, so that variables carry from block to block; each block's
	// output goes to its own file. curl fails on HTTP errors except in the
	// blocks that show errors.
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range blocks {
		code := strings.ReplaceAll(b.code, "http://127.0.0.1:8080", proxy.URL)
		if !b.expectError {
			code = strings.ReplaceAll(code, "curl -sS", "curl -sS --fail-with-body")
		}
		fmt.Fprintf(&script, "{\n%s\n} > %s 2>&1\n", code, outFile(work, i))
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	err = cmd.Run()
	for i, b := range blocks {
		out, _ := os.ReadFile(outFile(work, i))
		t.Logf("block %d:\n%s\n--- output:\n%s", i, b.code, out)
		if b.expectError {
			n := strings.Count(b.code, "curl ")
			if got := strings.Count(string(out), `"error":{"code":`); got != n {
				t.Errorf("block %d: %d error envelopes for %d curl calls", i, got, n)
			}
		} else if strings.Contains(string(out), `"error":`) {
			t.Errorf("block %d printed an error:\n%s", i, out)
		}
	}
	if err != nil {
		t.Fatalf("walkthrough failed: %v\nflowd stderr:\n%s", err, p.stderr)
	}
	proxy.check(t)
}

func outFile(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("block%02d.out", i)) }

// specProxy stands between a walkthrough and flowd and validates every
// response against openapi.json with kin-openapi, as a validating proxy
// (Prism) in front of a real server would.
type specProxy struct {
	*httptest.Server
	mu       sync.Mutex
	seen     int
	failures []string
}

var (
	walkSpecOnce   sync.Once
	walkSpecRouter routers.Router
	walkSpecErr    error
)

func newSpecProxy(t *testing.T, target string) *specProxy {
	t.Helper()
	walkSpecOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(httpapi.OpenAPIDocument())
		if err == nil {
			err = doc.Validate(loader.Context)
		}
		if err == nil {
			walkSpecRouter, err = gorillamux.NewRouter(doc)
		}
		walkSpecErr = err
	})
	if walkSpecErr != nil {
		t.Fatalf("openapi.json: %v", walkSpecErr)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	sp := &specProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		verr := validateResponse(resp.Request, resp, body)
		sp.mu.Lock()
		defer sp.mu.Unlock()
		sp.seen++
		if verr != nil {
			sp.failures = append(sp.failures, fmt.Sprintf("%s %s -> %d: %v\nresponse: %.500s",
				resp.Request.Method, resp.Request.URL.RequestURI(), resp.StatusCode, verr, body))
		}
		return nil
	}
	sp.Server = httptest.NewServer(rp)
	t.Cleanup(sp.Close)
	return sp
}

// check fails t for each response the document does not describe.
func (sp *specProxy) check(t *testing.T) {
	t.Helper()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.seen == 0 {
		t.Error("no response went through the validating proxy")
	}
	for _, f := range sp.failures {
		t.Errorf("response does not match openapi.json: %s", f)
	}
	t.Logf("%d responses validated against openapi.json", sp.seen)
}

// validateResponse checks one response against its operation. Every status
// must be documented, and writeOnly is enforced: a field the document says
// never comes back must not come back.
func validateResponse(req *http.Request, resp *http.Response, body []byte) error {
	find := req
	// {path} in /webhook/{path} stands for one or more segments (a
	// workflow builder path such as users/42/orders); the router matches one
	// segment, so deeper paths are looked up as their first segment: the
	// operation is the same.
	for _, prefix := range []string{"/webhook/", "/webhook-test/"} {
		if rest, ok := strings.CutPrefix(req.URL.Path, prefix); ok && strings.Contains(rest, "/") {
			find = req.Clone(context.Background())
			find.URL.Path = prefix + "p"
		}
	}
	route, params, err := walkSpecRouter.FindRoute(find)
	if err != nil {
		return fmt.Errorf("no operation in the document: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	})
}
