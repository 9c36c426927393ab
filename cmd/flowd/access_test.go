package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestKeyRolesThroughFlowd: flowctl makes keys with roles on a running
// flowd's data directory and lists them with their roles; over real HTTP a
// viewer reads and is refused every write with 403 FORBIDDEN naming its
// role; an unknown role is refused naming the allowed ones.
func TestKeyRolesThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	admin := initialKey(t, dir)

	out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	viewer := strings.TrimSpace(out)
	if _, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", "owner"); err == nil ||
		!strings.Contains(err.Error(), "role") || !strings.Contains(err.Error(), "admin, editor, operator, viewer") {
		t.Errorf("--role owner: err = %v, want the field and the allowed roles named", err)
	}
	list, err := flowctl(t, dir, "keys", "list", "--project", "default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "ROLE") || strings.Count(list, " admin ") != 1 || strings.Count(list, " viewer ") != 1 {
		t.Errorf("keys list shows no roles, or the wrong ones:\n%s", list)
	}

	var f struct{ ID string }
	api(t, p, admin, "POST", "/api/v1/flows", `{"name": "Deploy", "engine": "FLOW_BUILDER"}`, 201, &f)
	api(t, p, viewer, "GET", "/api/v1/flows/"+f.ID, "", 200, nil)
	var refused struct {
		Error struct{ Code, Message string }
	}
	api(t, p, viewer, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 403, &refused)
	if refused.Error.Code != "FORBIDDEN" || !strings.Contains(refused.Error.Message, "viewer") {
		t.Errorf("viewer enables: %+v, want FORBIDDEN naming the role", refused.Error)
	}
	api(t, p, viewer, "DELETE", "/api/v1/flows/"+f.ID, "", 403, nil)
	api(t, p, viewer, "POST", "/api/v1/connections", `{"name": "s", "app": "s", "type": "API_KEY", "value": {"apiKey": "k"}}`, 403, nil)
	api(t, p, admin, "GET", "/api/v1/flows/"+f.ID, "", 200, nil)
}

// TestAuditThroughFlowd: over real HTTP on flowd, a run's retry and a
// replay are in the audit log with the flows' changes, newest first, with
// the operator key that made them.
func TestAuditThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	admin := initialKey(t, dir)
	out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", "operator")
	if err != nil {
		t.Fatal(err)
	}
	operator := strings.TrimSpace(out)

	var f struct{ ID string }
	api(t, p, admin, "POST", "/api/v1/flows", `{"name": "Deploy", "engine": "FLOW_BUILDER",
		"steps": [{"name": "s", "type": "SET", "values": {"a": 1}}]}`, 201, &f)
	api(t, p, operator, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+f.ID, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	runID := resp.Header.Get("X-Run-Id")
	waitFor(t, "run "+runID+" to end", func() bool {
		var run struct{ Status string }
		api(t, p, admin, "GET", "/api/v1/flows/"+f.ID+"/runs/"+runID, "", 200, &run)
		return run.Status != "RUNNING"
	})
	api(t, p, operator, "POST", "/api/v1/flows/"+f.ID+"/runs/"+runID+"/retry", "", 201, nil)

	var page struct {
		Data []struct {
			Action   string
			Actor    struct{ KeyID, Role string }
			Resource struct{ Type, ID string }
			SourceIP string
		}
	}
	api(t, p, operator, "GET", "/api/v1/audit", "", 200, &page)
	want := []struct{ action, role, id string }{
		{"run.retry", "operator", runID}, {"flow.enable", "operator", f.ID}, {"flow.create", "admin", f.ID},
	}
	if len(page.Data) != len(want) {
		t.Fatalf("audit log = %+v, want %v", page.Data, want)
	}
	for i, w := range want {
		e := page.Data[i]
		if e.Action != w.action || e.Actor.Role != w.role || e.Resource.ID != w.id || e.Actor.KeyID == "" || e.SourceIP != "127.0.0.1" {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
}

// counting is a fake external service that counts the requests it gets and
// answers each with next(r).
func counting(t *testing.T, next func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		next(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestAllowedHostsThroughFlowd: a connection fenced to localhost is sent
// there, and a step that would send it to 127.0.0.1 (directly or by a
// redirect) fails naming the host, with nothing sent there; bad patterns
// are a 400 naming the entry.
func TestAllowedHostsThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	key := initialKey(t, dir)
	target, hits := counting(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true}`)) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(target.URL, "http://"))
	redirector, redirects := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/landed", http.StatusFound)
	})
	_, rport, _ := net.SplitHostPort(strings.TrimPrefix(redirector.URL, "http://"))

	for _, bad := range []string{`["*"]`, `["https://api.stripe.com"]`, `["api.stripe.com/v1"]`, `[""]`} {
		var e struct {
			Error struct{ Code, Message string }
		}
		api(t, p, key, "POST", "/api/v1/connections", `{"name": "s", "app": "s", "type": "API_KEY", "value": {"apiKey": "k"}, "allowedHosts": `+bad+`}`, 400, &e)
		if !strings.Contains(e.Error.Message, "allowedHosts[0]") {
			t.Errorf("allowedHosts %s: %q, want the entry named", bad, e.Error.Message)
		}
	}
	var c struct {
		ID           string
		AllowedHosts []string
	}
	api(t, p, key, "POST", "/api/v1/connections", `{"name": "fenced", "app": "svc", "type": "API_KEY",
		"value": {"apiKey": "sk_fenced_123"}, "allowedHosts": ["LOCALHOST"]}`, 201, &c)
	if len(c.AllowedHosts) != 1 || c.AllowedHosts[0] != "localhost" {
		t.Fatalf("created connection allowedHosts = %v", c.AllowedHosts)
	}
	flow := func(url string) string {
		var f struct{ ID string }
		api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "fenced", "engine": "FLOW_BUILDER",
			"steps": [{"name": "call", "type": "HTTP", "connectionId": %q, "method": "POST", "url": %q}]}`, c.ID, url), 201, &f)
		api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		return f.ID
	}

	direct := flow("http://127.0.0.1:" + port + "/x")
	if _, r := postHook(t, p, key, direct, "/api/v1/webhooks/"+direct, `{}`, nil); r.Status != "FAILED" ||
		!strings.Contains(r.Error, "refused to send it to 127.0.0.1") || !strings.Contains(r.Error, c.ID) {
		t.Errorf("send to 127.0.0.1 = %s %q, want FAILED naming the host and the connection", r.Status, r.Error)
	}
	if hits.Load() != 0 {
		t.Fatalf("the fenced step reached 127.0.0.1 %d times", hits.Load())
	}

	viaRedirect := flow("http://localhost:" + rport + "/go")
	if _, r := postHook(t, p, key, viaRedirect, "/api/v1/webhooks/"+viaRedirect, `{}`, nil); r.Status != "FAILED" ||
		!strings.Contains(r.Error, "redirected") || !strings.Contains(r.Error, "127.0.0.1") {
		t.Errorf("redirect to 127.0.0.1 = %s %q, want FAILED naming the host", r.Status, r.Error)
	}
	if redirects.Load() != 1 || hits.Load() != 0 {
		t.Fatalf("redirector got %d, target %d requests; want 1 and 0", redirects.Load(), hits.Load())
	}

	allowed := flow("http://localhost:" + port + "/x")
	if _, r := postHook(t, p, key, allowed, "/api/v1/webhooks/"+allowed, `{}`, nil); r.Status != "SUCCEEDED" {
		t.Errorf("send to localhost = %s %q, want SUCCEEDED", r.Status, r.Error)
	}
	if hits.Load() != 1 {
		t.Errorf("target got %d requests, want 1", hits.Load())
	}
}

// TestCredentialTypesThroughFlowd: BASIC, HEADER and QUERY connections are
// sent as their types say to a fake service that echoes them back; the run
// record shows every echo masked, no answer shows a value, and a value of
// the wrong shape is a 400 naming the field.
func TestCredentialTypesThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	key := initialKey(t, dir)
	const (
		user, pass = "sk_live_user_4711", "p@ss w0rd!"
		headerVal  = "tok_header_secret_1"
		queryVal   = "q s&cret/val"
	)
	var mu sync.Mutex
	var seen []string
	echo, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		u, pw, _ := r.BasicAuth()
		mu.Lock()
		seen = append(seen, u+"|"+pw+"|"+r.Header.Get("X-Api-Token")+"|"+r.URL.Query().Get("api_key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"authorization": r.Header.Get("Authorization"), "user": u, "password": pw,
			"token": r.Header.Get("X-Api-Token"), "rawQuery": r.URL.RawQuery, "apiKey": r.URL.Query().Get("api_key")})
	})

	for _, bad := range []struct{ typ, value, field string }{
		{"BASIC", `{"username": "u"}`, "value.password"},
		{"BASIC", `{"username": "u", "password": "p", "extra": 1}`, "value.extra"},
		{"HEADER", `{"name": "Bad Header", "value": "v"}`, "value.name"},
		{"QUERY", `{"name": "k", "value": 5}`, "value.value"},
		{"QUERY", `"just a string"`, "value must be an object"},
	} {
		var e struct{ Error struct{ Message string } }
		api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "x", "app": "x", "type": %q, "value": %s}`, bad.typ, bad.value), 400, &e)
		if !strings.Contains(e.Error.Message, bad.field) {
			t.Errorf("%s %s: %q, want %q named", bad.typ, bad.value, e.Error.Message, bad.field)
		}
	}
	conn := func(typ, value string) string {
		var c struct{ ID, Type string }
		raw := apiRaw(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": %q, "app": "echo", "type": %q, "value": %s}`, typ, typ, value), 201, &c)
		for _, secret := range []string{pass, user, headerVal, queryVal} {
			if strings.Contains(raw, secret) {
				t.Errorf("the %s connection's answer shows a credential: %s", typ, raw)
			}
		}
		if c.Type != typ {
			t.Errorf("connection type %q, want %q", c.Type, typ)
		}
		return c.ID
	}
	basic := conn("BASIC", fmt.Sprintf(`{"username": %q, "password": %q}`, user, pass))
	header := conn("HEADER", fmt.Sprintf(`{"name": "X-Api-Token", "value": %q}`, headerVal))
	query := conn("QUERY", fmt.Sprintf(`{"name": "api_key", "value": %q}`, queryVal))

	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "typed", "engine": "FLOW_BUILDER", "steps": [
		{"name": "basic", "type": "HTTP", "connectionId": %q, "url": %q},
		{"name": "header", "type": "HTTP", "connectionId": %q, "url": %q},
		{"name": "query", "type": "HTTP", "connectionId": %q, "url": %q}]}`,
		basic, echo.URL+"/b", header, echo.URL+"/h", query, echo.URL+"/q?page=2"), 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	_, r := postHook(t, p, key, f.ID, "/api/v1/webhooks/"+f.ID, `{}`, nil)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run = %s %q", r.Status, r.Error)
	}
	mu.Lock()
	want := []string{user + "|" + pass + "||", "||" + headerVal + "|", "|||" + queryVal}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the service saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	mu.Unlock()
	record := apiRaw(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/runs/"+r.ID, "", 200, nil)
	for _, secret := range []string{pass, user, headerVal, queryVal, url.QueryEscape(queryVal),
		base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))} {
		if strings.Contains(record, secret) {
			t.Errorf("the run record shows %q: %s", secret, record)
		}
	}
	if n := strings.Count(record, "********"); n < 6 {
		t.Errorf("the run record masks %d echoes, want every one: %s", n, record)
	}
}

// apiRaw is api that also returns the raw answer.
func apiRaw(t *testing.T, p *proc, key, method, path, body string, want int, out any) string {
	t.Helper()
	req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	return string(raw)
}

// TestFlowctlAccessCommands: flowctl makes a fenced BASIC connection on a
// running flowd (the password from stdin), and `flowctl audit` shows the
// change with the key's role; a viewer key's create is refused naming its
// role.
func TestFlowctlAccessCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	admin := initialKey(t, dir)
	out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	viewer := strings.TrimSpace(out)
	c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+admin)
	c.ok("pa55word-xyz\n", "connections", "create", "--name", "legacy", "--app", "erp", "--type", "BASIC",
		"--username", "svc", "--api-key-stdin", "--allowed-hosts", "erp.example.com,*.erp.example.com")
	var list struct {
		Data []struct {
			Type         string
			AllowedHosts []string
		}
	}
	if err := json.Unmarshal([]byte(c.ok("", "-o", "json", "connections", "list")), &list); err != nil || len(list.Data) != 1 ||
		list.Data[0].Type != "BASIC" || strings.Join(list.Data[0].AllowedHosts, ",") != "erp.example.com,*.erp.example.com" {
		t.Fatalf("connections list = %+v, %v", list, err)
	}
	audit := c.ok("", "audit")
	if !strings.HasPrefix(audit, "TIME") || !strings.Contains(audit, "connection.create") || !strings.Contains(audit, "admin") {
		t.Errorf("flowctl audit:\n%s", audit)
	}
	refused := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+viewer).run("k\n", "connections", "create", "--name", "x", "--app", "x", "--api-key-stdin")
	if refused.code == 0 || !strings.Contains(refused.stderr, "FORBIDDEN") || !strings.Contains(refused.stderr, "viewer") {
		t.Errorf("viewer's create: exit %d, stderr %q", refused.code, refused.stderr)
	}
	for _, r := range c.all {
		if strings.Contains(r.stdout+r.stderr, "pa55word-xyz") {
			t.Errorf("flowctl printed the password: %s %s", r.stdout, r.stderr)
		}
	}
}

// TestDashboardSignInAuditThroughFlowd: on flowd, a failed dashboard
// sign-in with a revoked key and a sign-in with a viewer key are in the
// audit log; the viewer's session is refused a form naming its role.
func TestDashboardSignInAuditThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	admin := initialKey(t, dir)
	mk := func(role string) string {
		out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", role)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	viewer, gone := mk("viewer"), mk("editor")
	var keys []struct{ ID, Role, Prefix string }
	out, err := flowctl(t, dir, "-o", "json", "keys", "list", "--project", "default")
	if err != nil || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 3 {
		t.Fatalf("keys list = %s, %v", out, err)
	}
	if _, err := flowctl(t, dir, "keys", "revoke", keys[2].ID); err != nil {
		t.Fatal(err)
	}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	signin := func(key string) (*http.Client, int, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.Get(p.base + "/ui/signin")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfRE.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no sign-in form: %s", b)
		}
		resp, err = c.PostForm(p.base+"/ui/signin", url.Values{"csrf": {html.UnescapeString(m[1])}, "apiKey": {key}, "next": {"/ui/flows"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return c, resp.StatusCode, string(b)
	}
	if _, status, _ := signin(gone); status != http.StatusUnauthorized {
		t.Fatalf("sign-in with a revoked key = %d", status)
	}
	c, status, body := signin(viewer)
	if status != http.StatusOK || !strings.Contains(body, ">viewer</span>") || strings.Contains(body, "New flow") {
		t.Fatalf("viewer's flows page = %d, badge %v, New flow offered %v", status, strings.Contains(body, ">viewer</span>"), strings.Contains(body, "New flow"))
	}
	m := csrfRE.FindStringSubmatch(body)
	resp, err := c.PostForm(p.base+"/ui/flows", url.Values{"csrf": {html.UnescapeString(m[1])}, "name": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "viewer") {
		t.Errorf("viewer's new flow form = %d", resp.StatusCode)
	}
	var page struct {
		Data []struct {
			Action string
			Actor  struct{ KeyID, Role string }
		}
	}
	api(t, p, admin, "GET", "/api/v1/audit", "", 200, &page)
	if len(page.Data) != 2 || page.Data[0].Action != "session.signin" || page.Data[0].Actor.Role != "viewer" ||
		page.Data[1].Action != "session.signin_failed" || page.Data[1].Actor.KeyID != keys[2].ID {
		t.Errorf("audit log = %+v", page.Data)
	}
}
