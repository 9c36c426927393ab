package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardMounted signs in to the dashboard of a running flowd with
// the initial key and reads the flows page; the API keeps its routes.
func TestDashboardMounted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	status, body := read(c.Get(p.base + "/ui/"))
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("GET /ui/ = %d, want the sign-in form: %s", status, body)
	}
	if keyFile := filepath.Join(dir, "initial-api-key"); !strings.Contains(body, keyFile) {
		t.Errorf("the sign-in page does not say the initial key is in %s: %s", keyFile, body)
	}
	status, body = read(c.PostForm(p.base+"/ui/signin", url.Values{
		"csrf": {m[1]}, "apiKey": {strings.TrimSpace(string(raw))}, "next": {"/ui/flows"},
	}))
	if status != http.StatusOK || !strings.Contains(body, "<h1>Flows</h1>") || !strings.Contains(body, "default") {
		t.Fatalf("sign-in then flows = %d: %s", status, body)
	}
	if status, _ := read(c.Get(p.base + "/api/v1/flows")); status != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/flows without a key = %d, want 401 (the cookie is no API credential)", status)
	}
}
