package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestUsersRoutes: an admin key invites, lists, reads, changes the role of
// and removes a person; the set-up link works once; the audit log names the
// key for each write; a removed person's session and personal key stop at
// once.
func TestUsersRoutes(t *testing.T) {
	srv, _ := newTestServer(t)
	keys := roleKeys(t, srv)
	admin := keys[automation.RoleAdmin]
	ctx := context.Background()

	r := call(t, srv, "POST", "/api/v1/users", admin, `{"email":"Ada@Example.com","role":"editor"}`)
	var inv struct {
		ID, Email, Role, Status, SetupURL, SetupExpires string
	}
	r.into(t, http.StatusCreated, &inv)
	if inv.Email != "ada@example.com" || inv.Role != "editor" || inv.Status != "invited" || !strings.HasPrefix(inv.ID, "usr_") {
		t.Fatalf("invited %+v", inv)
	}
	u, err := url.Parse(inv.SetupURL)
	if err != nil || u.Path != "/ui/setup" || !strings.HasPrefix(u.Query().Get("token"), "fsu_") {
		t.Fatalf("setupUrl %q", inv.SetupURL)
	}
	call(t, srv, "POST", "/api/v1/users", admin, `{"email":"ada@example.com","role":"viewer"}`).wantError(t, http.StatusConflict, "USER_EXISTS")
	call(t, srv, "POST", "/api/v1/users", admin, `{"email":"nope","role":"viewer"}`).wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
	call(t, srv, "POST", "/api/v1/users", admin, `{"email":"b@example.com","role":"owner"}`).wantError(t, http.StatusBadRequest, "")
	call(t, srv, "POST", "/api/v1/users", keys[automation.RoleEditor], `{"email":"b@example.com","role":"viewer"}`).wantError(t, http.StatusForbidden, "FORBIDDEN")

	if _, err := srv.svc.AcceptInvitation(ctx, u.Query().Get("token"), "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.svc.AcceptInvitation(ctx, u.Query().Get("token"), "correct horse battery"); err == nil {
		t.Fatal("the set-up link worked twice")
	}
	var list struct {
		Data []struct{ ID, Email, Role, Status string }
	}
	call(t, srv, "GET", "/api/v1/users", admin, "").into(t, http.StatusOK, &list)
	if len(list.Data) != 1 || list.Data[0].Status != "active" {
		t.Fatalf("users %+v", list.Data)
	}
	token, pr, err := srv.svc.PasswordSignIn(ctx, "ada@example.com", "correct horse battery", "r", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	personal, _, err := srv.svc.CreatePersonalKey(ctx, pr, "")
	if err != nil {
		t.Fatal(err)
	}
	call(t, srv, "POST", "/api/v1/flows", personal, `{"name":"f","trigger":{"type":"WEBHOOK"},"steps":[]}`).wantError(t, http.StatusBadRequest, "") // an editor's key gets past authorization

	var got struct{ Role string }
	call(t, srv, "POST", "/api/v1/users/"+inv.ID+"/role", admin, `{"role":"viewer"}`).into(t, http.StatusOK, &got)
	if got.Role != "viewer" {
		t.Fatalf("role %q", got.Role)
	}
	// The demotion holds from the next request: the personal key is a viewer's now.
	call(t, srv, "POST", "/api/v1/flows", personal, `{}`).wantError(t, http.StatusForbidden, "FORBIDDEN")
	call(t, srv, "GET", "/api/v1/users/"+inv.ID, admin, "").into(t, http.StatusOK, &got)

	if r := call(t, srv, "DELETE", "/api/v1/users/"+inv.ID, admin, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE user: %d %s", r.status, r.body)
	}
	call(t, srv, "GET", "/api/v1/flows", personal, "").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	if _, err := srv.svc.SessionPrincipal(ctx, token, ""); err == nil {
		t.Fatal("the removed person's session still works")
	}
	call(t, srv, "GET", "/api/v1/users/"+inv.ID, admin, "").wantError(t, http.StatusNotFound, "USER_NOT_FOUND")
	call(t, srv, "DELETE", "/api/v1/users/"+inv.ID, admin, "").wantError(t, http.StatusNotFound, "USER_NOT_FOUND")

	var audit struct {
		Data []struct {
			Action   string
			Actor    map[string]any
			Resource struct{ Type, ID string }
		}
	}
	call(t, srv, "GET", "/api/v1/audit", admin, "").into(t, http.StatusOK, &audit)
	var actions []string
	for _, e := range audit.Data {
		if e.Resource.Type == "user" {
			actions = append(actions, e.Action)
			if e.Resource.ID != inv.ID || e.Actor["keyId"] == nil {
				b, _ := json.Marshal(e)
				t.Errorf("entry %s", b)
			}
		}
	}
	if strings.Join(actions, ",") != "user.remove,user.set_role,user.invite" {
		t.Errorf("user actions in the log: %v", actions)
	}
	if strings.Contains(srv.log.String(), "audit entry written after its change") {
		t.Error("a user write's audit entry was not written with the change")
	}
}
