package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"flowservice/internal/testwait"
	"flowservice/pkg/pgstore/pgtest"
)

// TestMigrateDataDirToPostgres moves an installation made by a real
// embedded flowd onto PostgreSQL with flowctl migrate, twice (the second
// copies nothing), and reads it through a flowd node there: the same key
// works, the flow, its runs and its connection are there, and the flow
// runs again with the connection's secret opened under FLOWD_SECRET_KEY.
func TestMigrateDataDirToPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd processes on a PostgreSQL cluster")
	}
	var mu sync.Mutex
	var seen []string // the headers of every call, joined
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprint(r.Header))
		mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ext.Close()
	sawSecret := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n && strings.Contains(seen[n-1], "sk_migrated_42")
	}

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)
	var conn struct{ ID string }
	api(t, p, key, "POST", "/api/v1/connections", `{"name": "svc", "app": "svc", "type": "API_KEY", "value": {"apiKey": "sk_migrated_42"}}`, 201, &conn)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "moved", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "connectionId": %q, "method": "POST", "url": %q}]}`, conn.ID, ext.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	run := func(p *proc) string {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ RunID string }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("webhook = %d (%v)", resp.StatusCode, err)
		}
		var r struct{ Status, Error string }
		testwait.Event(t, "run "+got.RunID+" to finish", func() bool {
			api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+got.RunID, "", 200, &r)
			return r.Status != "RUNNING"
		})
		if r.Status != "SUCCEEDED" {
			t.Fatalf("run %s is %s %q", got.RunID, r.Status, r.Error)
		}
		return got.RunID
	}
	first := run(p)
	if !sawSecret(1) {
		t.Fatalf("the embedded run did not send the connection's key: %v", seen)
	}
	p.stop(t)

	url, secret := pgtest.URL(t), newSecretKey(t)
	migrate := func() string {
		t.Helper()
		cmd := exec.Command(flowctlBin, "migrate", "--from-data-dir", dir, "--to", url)
		cmd.Env = append(cmd.Environ(), "FLOWD_SECRET_KEY="+secret)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("flowctl migrate: %v\n%s", err, out)
		}
		if strings.Contains(string(out), secret) || strings.Contains(string(out), "sk_migrated_42") {
			t.Fatalf("flowctl migrate printed a key:\n%s", out)
		}
		return string(out)
	}
	if out := migrate(); !strings.Contains(out, "1 secrets sealed again") || strings.Contains(out, "migrated: 0 rows") {
		t.Fatalf("first migrate:\n%s", out)
	}
	if out := migrate(); !strings.Contains(out, "migrated: 0 rows copied") {
		t.Fatalf("second migrate copied again:\n%s", out)
	}

	n := startFlowd(t, filepath.Join(t.TempDir(), "node"), clusterEnv(url, secret)...)
	var f struct{ ID, Status string }
	api(t, n, key, "GET", "/api/v1/flows/"+flow.ID, "", 200, &f)
	if f.Status != "ACTIVE" {
		t.Errorf("migrated flow is %s, want ACTIVE", f.Status)
	}
	var r struct{ Status string }
	api(t, n, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+first, "", 200, &r)
	if r.Status != "SUCCEEDED" {
		t.Errorf("migrated run is %s, want SUCCEEDED", r.Status)
	}
	var conns struct{ Data []struct{ ID string } }
	api(t, n, key, "GET", "/api/v1/connections", "", 200, &conns)
	if len(conns.Data) != 1 || conns.Data[0].ID != conn.ID {
		t.Errorf("migrated connections = %+v", conns.Data)
	}
	second := run(n)
	if second == first || !sawSecret(2) {
		t.Fatalf("the run on PostgreSQL did not send the connection's key: %v", seen)
	}
	var page struct{ Data []struct{ ID string } }
	api(t, n, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &page)
	if len(page.Data) != 2 || page.Data[0].ID != second {
		t.Errorf("runs after the migration = %+v, want the new run first, then the migrated one", page.Data)
	}
}
