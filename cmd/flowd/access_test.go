package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		var run struct{ Status string }
		api(t, p, admin, "GET", "/api/v1/flows/"+f.ID+"/runs/"+runID, "", 200, &run)
		if run.Status != "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
