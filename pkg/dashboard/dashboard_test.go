package dashboard

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/oauth"
)

// env is a dashboard over a real SQLite data directory.
type env struct {
	srv   *httptest.Server
	svc   *automation.Service
	store automation.Store
	p     automation.Project
	key   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	fe := flowtest.New(t, flowtest.Options{OAuth: oauth.New(http.DefaultTransport)})
	svc, dir := fe.Svc, fe.Dir
	doc, err := os.ReadFile("../httpapi/openapi.json") // the API document the servers pass
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(svc, Options{Key: dir.CursorKey, OpenAPI: doc}))
	t.Cleanup(srv.Close)
	e := &env{srv: srv, svc: svc, store: fe.Store}
	e.p, e.key = e.project(t, "acme", automation.PlanEnterprise)
	return e
}

// project creates a project with one key.
func (e *env) project(t *testing.T, name string, plan automation.Plan) (automation.Project, string) {
	t.Helper()
	ctx := context.Background()
	p, err := e.svc.CreateProject(ctx, name, plan)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := e.svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p, key
}

func (e *env) flow(t *testing.T, p automation.Project, name string, steps ...automation.Step) automation.Flow {
	t.Helper()
	eng := automation.FlowBuilder
	in := automation.FlowInput{Name: &name, Engine: &eng}
	if steps != nil {
		in.Steps = &steps
	}
	f, err := e.svc.CreateFlow(context.Background(), p, in)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// browser keeps cookies and does not follow redirects, so tests see them.
type browser struct {
	t   *testing.T
	e   *env
	hc  *http.Client
	url *url.URL
}

func (e *env) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(e.srv.URL)
	return &browser{t: t, e: e, url: u, hc: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { return b.do("GET", path, nil) }

// post sends a form with the CSRF token of the page at from.
func (b *browser) post(from, path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", csrfOf(b.t, b.get(from)))
	return b.do("POST", path, form)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in page (%d): %s", p.status, p.body)
	}
	return m[1]
}

func (b *browser) signin(key string) page {
	b.t.Helper()
	return b.post("/ui/signin", "/ui/signin", url.Values{"apiKey": {key}})
}

func (b *browser) cookie(name string) *http.Cookie {
	for _, c := range b.hc.Jar.Cookies(b.url) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func wantRedirect(t *testing.T, p page, prefix string) {
	t.Helper()
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), prefix) {
		t.Fatalf("got %d Location %q, want 303 to %s…; body %s", p.status, p.header.Get("Location"), prefix, p.body)
	}
}

func wantPage(t *testing.T, p page, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d; body %s", p.status, status, p.body)
	}
	for _, s := range contains {
		if !strings.Contains(p.body, s) {
			t.Errorf("page lacks %q: %s", s, p.body)
		}
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)

	bad := b.signin("fsk_not-a-real-key")
	wantPage(t, bad, http.StatusUnauthorized, "That API key is not valid.")
	if b.cookie(sessionCookie) != nil {
		t.Fatal("a bad key got a session cookie")
	}
	if strings.Contains(bad.body, "fsk_not-a-real-key") {
		t.Error("the sign-in page echoed the key")
	}

	good := b.signin(e.key)
	wantRedirect(t, good, "/ui/flows")
	var sc *http.Cookie
	for _, c := range (&http.Response{Header: good.header}).Cookies() {
		if c.Name == sessionCookie {
			sc = c
		}
	}
	if sc == nil {
		t.Fatalf("no session cookie set: %v", good.header["Set-Cookie"])
	}
	if !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/ui" || sc.Secure {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, not Secure over plain HTTP", sc)
	}
	if strings.Contains(sc.Value, e.key) || strings.Contains(sc.Value, strings.TrimPrefix(e.key, "fsk_")) {
		t.Error("the session cookie holds the API key")
	}
	wantPage(t, b.get("/ui/flows"), http.StatusOK, "acme", "Sign out")

	// Signing out drops the cookie.
	wantRedirect(t, b.post("/ui/flows", "/ui/signout", nil), "/ui/signin?why=signedout")
	wantRedirect(t, b.get("/ui/flows"), "/ui/signin")
}

func TestSecureCookie(t *testing.T) {
	e := newEnv(t)
	trusted := netip.MustParsePrefix("192.0.2.0/24")
	tests := []struct {
		name       string
		opts       Options
		tls        bool
		remote     string
		proto      string
		wantSecure bool
	}{
		{"plain http", Options{}, false, "198.51.100.1:1234", "", false},
		{"tls", Options{}, true, "198.51.100.1:1234", "", true},
		{"forwarded proto, untrusted", Options{}, false, "192.0.2.1:1234", "https", false},
		{"forwarded proto, other address", Options{TrustedProxies: []netip.Prefix{trusted}}, false, "198.51.100.1:1234", "https", false},
		{"forwarded proto, trusted proxy", Options{TrustedProxies: []netip.Prefix{trusted}}, false, "192.0.2.1:1234", "https", true},
		{"always secure", Options{SecureCookies: true}, false, "198.51.100.1:1234", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(e.svc, tt.opts)
			req := httptest.NewRequest("GET", "/ui/signin", nil)
			req.RemoteAddr = tt.remote
			if tt.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			if tt.tls {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			cs := rec.Result().Cookies()
			if len(cs) != 1 || cs[0].Secure != tt.wantSecure {
				t.Errorf("cookies %v, want one with Secure=%v", cs, tt.wantSecure)
			}
		})
	}
}

func TestPagesNeedSession(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	b := e.browser(t)
	for _, path := range []string{"/ui/", "/ui/flows", "/ui/flows/" + f.ID, "/ui/flows/" + f.ID + "/runs", "/ui/connections"} {
		p := b.get(path)
		if path == "/ui/" {
			wantRedirect(t, p, "/ui/flows")
			continue
		}
		wantRedirect(t, p, "/ui/signin?next="+url.QueryEscape(path))
	}
	// A POST without a session changes nothing.
	wantRedirect(t, b.do("POST", "/ui/flows/"+f.ID+"/enable", url.Values{"csrf": {"x"}}), "/ui/signin")
	if got, _ := e.svc.Flow(context.Background(), e.p, f.ID); got.Status != automation.FlowInactive {
		t.Errorf("status %s after an unauthenticated POST", got.Status)
	}
	// A forged session cookie is refused.
	b.hc.Jar.SetCookies(b.url, []*http.Cookie{{Name: sessionCookie, Value: "v1.9999999999.AAAA." + automation.HashAPIKey(e.key) + ".AAAA", Path: "/ui"}})
	wantRedirect(t, b.get("/ui/flows"), "/ui/signin?why=expired")

	// After signing in, the page asked for first is where the user lands.
	p := b.get("/ui/flows/" + f.ID)
	loc, _ := url.Parse(p.header.Get("Location"))
	form := url.Values{"apiKey": {e.key}, "next": {loc.Query().Get("next")}}
	form.Set("csrf", csrfOf(t, b.get(loc.RequestURI())))
	wantRedirect(t, b.do("POST", "/ui/signin", form), "/ui/flows/"+f.ID)
	// but never another site.
	form.Set("next", "//evil.example/")
	form.Set("csrf", csrfOf(t, b.get("/ui/signin")))
	p = b.do("POST", "/ui/signin", form)
	if p.header.Get("Location") != "/ui/flows" {
		t.Errorf("next=//evil.example/ redirected to %q", p.header.Get("Location"))
	}
}

func TestRevokedKeyEndsSession(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/flows"), http.StatusOK)
	ctx := context.Background()
	keys, err := e.svc.APIKeys(ctx, e.p.ID)
	if err != nil || len(keys) != 1 {
		t.Fatal(keys, err)
	}
	if err := e.svc.RevokeAPIKey(ctx, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, b.get("/ui/flows"), "/ui/signin?why=revoked")
	wantPage(t, b.get("/ui/signin?why=revoked"), http.StatusOK, "no longer valid")
	// The old session cannot be replayed either.
	wantRedirect(t, b.get("/ui/connections"), "/ui/signin")
}

func TestCSRF(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	other := e.browser(t)
	wantRedirect(t, other.signin(e.key), "/ui/flows")
	otherToken := csrfOf(t, other.get("/ui/flows"))

	for name, form := range map[string]url.Values{
		"missing":           {},
		"wrong":             {"csrf": {"AAAA"}},
		"another session's": {"csrf": {otherToken}},
	} {
		for _, path := range []string{"/ui/flows/" + f.ID + "/enable", "/ui/connections", "/ui/signout"} {
			p := b.do("POST", path, form)
			if p.status != http.StatusForbidden {
				t.Errorf("%s token, POST %s: status %d, want 403", name, path, p.status)
			}
		}
	}
	if got, _ := e.svc.Flow(context.Background(), e.p, f.ID); got.Status != automation.FlowInactive {
		t.Errorf("flow became %s through a POST without CSRF token", got.Status)
	}
	// The sign-in form has its own token.
	fresh := e.browser(t)
	fresh.get("/ui/signin")
	wantPage(t, fresh.do("POST", "/ui/signin", url.Values{"apiKey": {e.key}}), http.StatusForbidden)
	if fresh.cookie(sessionCookie) != nil {
		t.Error("sign-in without CSRF token made a session")
	}
}

func TestEnableDisable(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	ctx := context.Background()
	path := "/ui/flows/" + f.ID

	wantRedirect(t, b.post(path, path+"/enable", nil), path+"?done=enabled")
	if got, _ := e.svc.Flow(ctx, e.p, f.ID); got.Status != automation.FlowActive {
		t.Fatalf("status %s after enable, want ACTIVE", got.Status)
	}
	wantPage(t, b.get(path+"?done=enabled"), http.StatusOK, "Flow enabled", `action="/ui/flows/`+f.ID+`/disable"`)

	wantRedirect(t, b.post(path, path+"/disable", nil), path+"?done=disabled")
	if got, _ := e.svc.Flow(ctx, e.p, f.ID); got.Status != automation.FlowInactive {
		t.Fatalf("status %s after disable, want INACTIVE", got.Status)
	}
	wantPage(t, b.get("/ui/flows?status=INACTIVE"), http.StatusOK, "Deploy")
	if p := b.get("/ui/flows?status=ACTIVE"); strings.Contains(p.body, "Deploy") {
		t.Error("an INACTIVE flow is listed under status ACTIVE")
	}
}

func TestConnectionKeyNeverRendered(t *testing.T) {
	const secret = "sk_live_SUPERSECRET_4242"
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	// A failed create keeps the other fields, not the key.
	p := b.post("/ui/connections", "/ui/connections", url.Values{"name": {""}, "app": {"slack"}, "apiKey": {secret}})
	wantPage(t, p, http.StatusBadRequest, "name", `value="slack"`)
	if strings.Contains(p.body, secret) {
		t.Fatal("the failed create form rendered the key")
	}

	wantRedirect(t, b.post("/ui/connections", "/ui/connections",
		url.Values{"name": {"Slack bot"}, "app": {"slack"}, "apiKey": {secret}, "header": {"X-Api-Key"}}),
		"/ui/connections?done=created")
	l, err := e.svc.ListConnections(context.Background(), e.p, automation.PageRequest{})
	if err != nil || len(l.Data) != 1 {
		t.Fatal(l, err)
	}
	c := l.Data[0]
	_, v, err := e.svc.ConnectionCredential(context.Background(), e.p.ID, c.ID)
	if err != nil || v.APIKey.Reveal() != secret || v.Header != "X-Api-Key" || v.Prefix == nil || *v.Prefix != "" {
		t.Fatalf("stored credential %+v, %v", v, err)
	}
	for _, path := range []string{"/ui/connections?done=created", "/ui/connections/" + c.ID + "/delete", "/ui/flows"} {
		p := b.get(path)
		wantPage(t, p, http.StatusOK)
		if strings.Contains(p.body, secret) {
			t.Errorf("%s renders the connection's key", path)
		}
	}
	wantPage(t, b.get("/ui/connections"), http.StatusOK, "Slack bot", `type="password"`)

	// Delete asks first, then revokes.
	confirm := "/ui/connections/" + c.ID + "/delete"
	wantPage(t, b.get(confirm), http.StatusOK, "cannot be undone")
	wantRedirect(t, b.post(confirm, confirm, nil), "/ui/connections?done=deleted")
	if _, err := e.svc.Connection(context.Background(), e.p, c.ID); !automation.IsNotFound(err) {
		t.Errorf("connection after delete: %v, want not found", err)
	}
	if p := b.get("/ui/connections"); strings.Contains(p.body, "Slack bot") {
		t.Error("deleted connection still listed")
	}
}

func TestEscaping(t *testing.T) {
	const name = `<script>alert("x")</script>`
	e := newEnv(t)
	f := e.flow(t, e.p, name)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	for _, path := range []string{"/ui/flows", "/ui/flows/" + f.ID, "/ui/flows/" + f.ID + "/runs"} {
		p := b.get(path)
		wantPage(t, p, http.StatusOK, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
		if strings.Contains(p.body, "<script>alert") {
			t.Errorf("%s renders the name unescaped", path)
		}
	}
}

func TestOtherProjectIsNotFound(t *testing.T) {
	e := newEnv(t)
	other, _ := e.project(t, "other", automation.PlanEnterprise)
	theirs := e.flow(t, other, "Their secret flow")
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	for _, path := range []string{"/ui/flows/" + theirs.ID, "/ui/flows/" + theirs.ID + "/runs", "/ui/flows/flw_nope"} {
		p := b.get(path)
		wantPage(t, p, http.StatusNotFound, "not found")
		if strings.Contains(p.body, "Their secret flow") {
			t.Errorf("%s leaks the other project's flow", path)
		}
	}
	wantPage(t, b.post("/ui/flows", "/ui/flows/"+theirs.ID+"/enable", nil), http.StatusNotFound)
	if got, _ := e.svc.Flow(context.Background(), other, theirs.ID); got.Status != automation.FlowInactive {
		t.Errorf("other project's flow is %s", got.Status)
	}
	wantPage(t, b.get("/ui/nowhere"), http.StatusNotFound)
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	check := func(p page) {
		t.Helper()
		h := p.header
		if h.Get("Cache-Control") != "no-store" || h.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("headers %v", h)
		}
	}
	check(b.get("/ui/signin"))
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	check(b.get("/ui/flows"))
	check(b.get("/ui/flows/flw_nope"))
	css := b.get("/ui/static/style.css")
	wantPage(t, css, http.StatusOK, ".card")
	check(css)
	// No inline script: the CSP would block it.
	if p := b.get("/ui/flows"); strings.Contains(p.body, "<script>") || strings.Contains(p.body, "onclick") {
		t.Error("page has inline script")
	}
}

func TestFlowWebhookSampleAndRuns(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy", automation.Step{Name: "pick", Type: automation.StepSet,
		Values: json.RawMessage(`{"ref":"{{ trigger.body.ref }}"}`)})
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	path := "/ui/flows/" + f.ID

	wantPage(t, b.get(path), http.StatusOK, "http://engine.test/api/v1/webhooks/"+f.ID, "data-copy", "No event captured yet")
	wantPage(t, b.post(path, path+"/test", nil), http.StatusOK, "Armed until", `value="http://engine.test/api/v1/webhooks/`+f.ID+`"`)

	// The next delivery is captured and runs the inactive flow once.
	ctx := context.Background()
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
		Body: json.RawMessage(`{"ref":"refs/heads/main","commits":[{"id":7}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ExecuteRun(ctx, e.p.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	wantPage(t, b.get(path), http.StatusOK, "Captured sample", "trigger.body.ref", "trigger.body.commits[].id", "integer")

	wantPage(t, b.get(path+"/runs"), http.StatusOK, run.ID, "SUCCEEDED")
	wantPage(t, b.get(path+"/runs?status=FAILED"), http.StatusOK, "No runs with status FAILED")
	wantPage(t, b.get(path+"/runs/"+run.ID), http.StatusOK, "pick", "SUCCEEDED", "refs/heads/main", " ms")
	wantPage(t, b.get(path+"/runs/run_nope"), http.StatusNotFound)
	wantPage(t, b.get(path+"/runs?status=BOGUS"), http.StatusBadRequest, "status must be one of")
}

func TestAllowlist(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	path := "/ui/flows/" + f.ID
	ctx := context.Background()

	wantRedirect(t, b.post(path, path+"/allowlist", url.Values{"allowedIPs": {"203.0.113.9/24\n198.51.100.7"}}), path+"?done=allowlist")
	sec, err := e.svc.WebhookSecurity(ctx, e.p, f.ID)
	if err != nil || strings.Join(sec.AllowedIPs, ",") != "203.0.113.0/24,198.51.100.7" {
		t.Fatalf("allowlist %v, %v", sec.AllowedIPs, err)
	}
	wantPage(t, b.get(path), http.StatusOK, "203.0.113.0/24\n198.51.100.7</textarea>")

	p := b.post(path, path+"/allowlist", url.Values{"allowedIPs": {"not-an-ip"}})
	wantPage(t, p, http.StatusBadRequest, "not-an-ip", "CIDR")

	// A project on another plan gets no form.
	free, key := e.project(t, "free", automation.PlanFree)
	ff := e.flow(t, free, "Cheap")
	fb := e.browser(t)
	wantRedirect(t, fb.signin(key), "/ui/flows")
	fp := fb.get("/ui/flows/" + ff.ID)
	wantPage(t, fp, http.StatusOK, "need the ENTERPRISE plan")
	if strings.Contains(fp.body, `name="allowedIPs"`) {
		t.Error("FREE project sees the allowlist form")
	}
	wantPage(t, fb.post("/ui/flows/"+ff.ID, "/ui/flows/"+ff.ID+"/allowlist", url.Values{"allowedIPs": {"10.0.0.1"}}),
		http.StatusForbidden, "ENTERPRISE")
}

func TestFlowsPaging(t *testing.T) {
	e := newEnv(t)
	for i := range 30 {
		e.flow(t, e.p, "flow-"+string(rune('a'+i/26))+string(rune('a'+i%26)))
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	seen := map[string]bool{}
	nextRE := regexp.MustCompile(`href="(/ui/flows\?[^"]+)" rel="next">Next page`)
	rowRE := regexp.MustCompile(`>(flow-[a-z]{2})</a>`)
	path := "/ui/flows"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		p := b.get(strings.ReplaceAll(path, "&amp;", "&"))
		wantPage(t, p, http.StatusOK)
		for _, m := range rowRE.FindAllStringSubmatch(p.body, -1) {
			if seen[m[1]] {
				t.Errorf("%s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := nextRE.FindStringSubmatch(p.body); m != nil {
			path = m[1]
		}
	}
	if len(seen) != 30 {
		t.Errorf("saw %d flows over all pages, want 30", len(seen))
	}
	wantPage(t, b.get("/ui/flows?page=0"), http.StatusBadRequest, "page must be")
	wantPage(t, b.get("/ui/flows?sort=color"), http.StatusBadRequest, "sort must be one of name, lastRun, successRate, created")
}

func TestPrefix(t *testing.T) {
	e := newEnv(t)
	h := New(e.svc, Options{Prefix: func(*http.Request) string { return "/prod" }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/flows", nil))
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/prod/ui/signin") {
		t.Errorf("Location %q, want /prod/ui/signin…", loc)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/signin", nil))
	if !strings.Contains(rec.Body.String(), `action="/prod/ui/signin"`) || rec.Result().Cookies()[0].Path != "/prod/ui" {
		t.Errorf("sign-in page ignores the prefix: %v %s", rec.Result().Cookies(), rec.Body)
	}
}

// The run page shows a SWITCH's branch, a FOR_EACH's items with their
// steps, skipped steps, and onError steps.
func TestRunPageShowsNestedSteps(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Nested",
		automation.Step{Name: "never", Type: automation.StepSet, When: "false", Values: json.RawMessage(`{}`)},
		automation.Step{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{{When: "true", Steps: []automation.Step{
			{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.xs"`), Steps: []automation.Step{
				{Name: "check", Type: automation.StepFilter, Condition: "item != 'stop'"},
				{Name: "double", Type: automation.StepSet, Values: json.RawMessage(`{"v": "{{ item }}{{ item }}"}`)},
			}}}}}},
	)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	ctx := context.Background()
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
		Body: json.RawMessage(`{"xs":["ab","stop"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ExecuteRun(ctx, e.p.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	page := b.get("/ui/flows/" + f.ID + "/runs/" + run.ID)
	wantPage(t, page, http.StatusOK, `class="card step skipped"`, "never", "route", `class="nested"`,
		"Item 0", "Item 1", "abab", "double", `&#34;passed&#34;: false`)
}
