package main

import (
	"path/filepath"
	"strings"
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
