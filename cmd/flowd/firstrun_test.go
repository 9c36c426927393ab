package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpAndVersionTouchNothing: flowd --help and --version print and
// exit at once, creating no data directory and binding no port.
func TestHelpAndVersionTouchNothing(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--help", "FLOWD_DATA_DIR"},
		{"-h", "Usage: flowd"},
		{"--version", "flowd "},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(flowdBin, tt.arg)
			cmd.Env = append(os.Environ(), "FLOWD_DATA_DIR="+dir, "FLOWD_ADDR="+freeAddr(t))
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("flowd %s: err %v, output %q, want %q", tt.arg, err, out, tt.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("flowd %s created %s (stat: %v)", tt.arg, dir, err)
			}
		})
	}
	cmd := exec.Command(flowdBin, "--port", "1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FLOWD_") {
		t.Errorf("flowd --port 1: err %v, output %q; want a failure that points at the FLOWD_ variables", err, out)
	}
}

// TestTakenPortCreatesNothing: a flowd whose port is taken stops before it
// creates a data directory, a project or a key, in both backends (the AWS
// one never reaches AWS: there is no endpoint to reach).
func TestTakenPortCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(flowdBin)
			cmd.Env = append(os.Environ(), "FLOWD_ADDR="+ln.Addr().String(), "FLOWD_DATA_DIR="+dir,
				"FLOWD_BACKEND="+backend, "AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_REGION=us-east-1")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "listen on "+ln.Addr().String()) {
				t.Fatalf("flowd on a taken port: err %v, output %q", err, out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("flowd on a taken port created %s (stat: %v)", dir, err)
			}
		})
	}
}

// TestAWSBackendTakesTheDirectoryLock: flowd on AWS writes its initial key
// to the data directory, so a second flowd there is refused before it
// touches AWS, like a second embedded one.
func TestAWSBackendTakesTheDirectoryLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	startFlowd(t, dir) // holds the lock
	cmd := exec.Command(flowdBin)
	cmd.Env = append(os.Environ(), "FLOWD_ADDR="+freeAddr(t), "FLOWD_DATA_DIR="+dir,
		"FLOWD_BACKEND=aws", "AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_REGION=us-east-1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another flowd") {
		t.Fatalf("flowd aws on a locked directory: err %v, output %q", err, out)
	}
}

// TestRootSendsBrowsersToTheDashboard: a browser opening the address lands
// on the dashboard; a script still gets the API's JSON 404.
func TestRootSendsBrowsersToTheDashboard(t *testing.T) {
	p := startFlowd(t, filepath.Join(t.TempDir(), "data"))
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(accept string) *http.Response {
		req, _ := http.NewRequest("GET", p.base+"/", nil)
		req.Header.Set("Accept", accept)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get("text/html,application/xhtml+xml,*/*;q=0.8"); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/ui/" {
		t.Errorf("browser GET / = %d to %q, want 302 to /ui/", r.StatusCode, r.Header.Get("Location"))
	}
	if r := get("*/*"); r.StatusCode != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Errorf("curl GET / = %d %s, want a JSON 404", r.StatusCode, r.Header.Get("Content-Type"))
	}
}
