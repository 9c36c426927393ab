package awstest

import (
	"net/http"
	"os"
	"regexp"
	"syscall"
	"testing"

	"flowservice/internal/testwait"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServerLifecycle checks that a server answers on loopback and that Stop
// really ends its process group.
func TestServerLifecycle(t *testing.T) {
	s, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(s.URL) {
		t.Errorf("URL = %q, want http://127.0.0.1:<port>", s.URL)
	}
	resp, err := http.Get(s.URL + "/moto-api/")
	if err != nil {
		t.Fatalf("GET moto-api: %v", err)
	}
	resp.Body.Close()
	cfg := s.Config()
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != s.URL || cfg.Region != Region {
		t.Errorf("Config endpoint %v region %q, want %s %s", cfg.BaseEndpoint, cfg.Region, s.URL, Region)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != accessKeyID {
		t.Errorf("credentials = %v, %v; want the static fake ones", creds.AccessKeyID, err)
	}
	pgid := s.cmd.Process.Pid
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// Signal 0 probes the group: ESRCH once every member has exited.
	testwait.For(t, testwait.Hang, "the process group to exit after Stop", func() bool {
		return syscall.Kill(-pgid, 0) != nil
	})
	if _, err := http.Get(s.URL + "/moto-api/"); err == nil {
		t.Errorf("server still answers after Stop")
	}
}

func TestStartShares(t *testing.T) {
	a, b := Start(t), Start(t)
	if *a.BaseEndpoint != *b.BaseEndpoint {
		t.Errorf("Start gave %s then %s; under Main the server is shared", *a.BaseEndpoint, *b.BaseEndpoint)
	}
}

func TestMissingMotoServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := StartServer(); err == nil || err.Error() != InstallHint {
		t.Errorf("StartServer without moto_server = %v, want %q", err, InstallHint)
	}
}

func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{2,63}$`)
	for range 100 {
		n := UniqueName(t, "tbl")
		if seen[n] || !valid.MatchString(n) {
			t.Fatalf("UniqueName = %q: repeated or not a valid name", n)
		}
		seen[n] = true
	}
}
