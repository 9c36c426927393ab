package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/oauth/oauthtest"
)

// TestOAuth2ConnectionEndToEnd: the operator adds an app with flowctl, a
// user connects it in the dashboard of a running flowd through a real
// authorization server's consent, and a flow's HTTP step calls the
// provider's API with the (refreshed) access token.
func TestOAuth2ConnectionEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1")
	key := initialKey(t, dir)
	// Access tokens shorter than the refresh margin: the run refreshes.
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: p.base, AccessTokenExp: 30 * time.Second})
	defer idp.Close()

	add := exec.Command(flowctlBin, "--data-dir", dir, "oauth-apps", "add", "idp", "--client-id", oauthtest.ClientID,
		"--client-secret-stdin", "--authorize-url", idp.AuthorizeURL, "--token-url", idp.TokenURL, "--scopes", "read write")
	add.Stdin = strings.NewReader(oauthtest.ClientSecret + "\n")
	var stderr bytes.Buffer
	add.Stderr = &stderr
	out, err := add.Output()
	if err != nil || !strings.Contains(string(out), "idp") || strings.Contains(string(out), oauthtest.ClientSecret) {
		t.Fatalf("oauth-apps add: %v %s %s", err, out, stderr.String())
	}
	if out, err := flowctl(t, dir, "oauth-apps", "list"); err != nil || !tableRow(out, "idp", oauthtest.ClientID, "read write") {
		t.Fatalf("oauth-apps list: %v\n%s", err, out)
	}
	if _, err := flowctl(t, dir, "oauth-apps", "add", "idp2", "--client-id", "x", "--authorize-url", "https://a", "--token-url", "https://t"); err == nil ||
		!strings.Contains(err.Error(), "--client-secret-stdin is required") {
		t.Errorf("oauth-apps add without the secret: %v", err)
	}

	// The dashboard: sign in, Connect idp, allow at the provider, come back.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	read := func(resp *http.Response, err error) (*http.Response, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	_, body := read(c.Get(p.base + "/ui/signin"))
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatalf("no sign-in form: %s", body)
	}
	read(c.PostForm(p.base+"/ui/signin", url.Values{"csrf": {csrf[1]}, "apiKey": {key}}))
	if _, body := read(c.Get(p.base + "/ui/connections")); !strings.Contains(body, "Connect idp") {
		t.Fatalf("connections page lacks Connect idp: %s", body)
	}
	resp, _ := read(c.Get(p.base + "/ui/connections/connect/idp"))
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("Connect idp = %d", resp.StatusCode)
	}
	back, err := idp.Consent(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp, body = read(c.Get(back.String()))
	conID := regexp.MustCompile(`con_[A-Za-z0-9_-]+`).FindString(body)
	if resp.StatusCode != http.StatusOK || conID == "" {
		t.Fatalf("callback = %d: %s\nflowd stderr:\n%s", resp.StatusCode, body, p.stderr)
	}

	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "whoami", "engine": "FLOW_BUILDER",
		"steps": [{"name": "me", "type": "HTTP", "method": "GET", "url": %q, "connectionId": %q}]}`, idp.ResourceURL, conID), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	runOnce := func() (status, output string) {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		runID := resp.Header.Get("X-Run-Id")
		var run struct {
			Status, Error string
			Steps         []struct{ Output any }
		}
		waitFor(t, "run "+runID+" to end", func() bool {
			api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+runID, "", 200, &run)
			return run.Status != "RUNNING"
		})
		return run.Status, fmt.Sprint(run.Steps, run.Error)
	}
	before := idp.TokenRequests()
	if st, out := runOnce(); st != "SUCCEEDED" || !strings.Contains(out, "alice") {
		t.Fatalf("run with the OAuth2 connection: %s %s\nflowd stderr:\n%s", st, out, p.stderr)
	}
	if idp.TokenRequests() == before {
		t.Errorf("the run used a nearly expired access token without refreshing it")
	}

	// The user revokes access at the provider: the next run fails naming
	// the connection, which is REVOKED.
	idp.Revoke()
	if st, out := runOnce(); st != "FAILED" || !strings.Contains(out, conID) || !strings.Contains(out, "REVOKED") {
		t.Errorf("run after revocation: %s %s", st, out)
	}
	var con struct{ Status string }
	api(t, p, key, "GET", "/api/v1/connections/"+conID, "", 200, &con)
	if con.Status != "REVOKED" {
		t.Errorf("connection after revocation: %s, want REVOKED", con.Status)
	}

	if out, err := flowctl(t, dir, "oauth-apps", "remove", "idp"); err != nil || !strings.Contains(out, "removed idp") {
		t.Errorf("oauth-apps remove: %v %s", err, out)
	}
	if _, err := flowctl(t, dir, "oauth-apps", "remove", "idp"); err == nil || !strings.Contains(err.Error(), "OAUTH_APP_NOT_FOUND") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("second remove: %v", err)
	}
}
