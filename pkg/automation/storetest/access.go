package storetest

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testKeyRoles: every role round-trips, and a key stored without a role
// reads as admin, the power every key had before roles existed.
func testKeyRoles(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := newProject("roles", base)
	must(t, "create project", s.CreateProject(ctx, p))
	var want []automation.APIKey
	for i, r := range automation.Roles {
		k := newKey(p.ID, base.Add(time.Duration(i)*time.Millisecond))
		k.Role = r
		must(t, "CreateKey "+string(r), s.CreateKey(ctx, k))
		got, err := s.KeyByHash(ctx, k.Hash)
		must(t, "KeyByHash "+string(r), err)
		equalKey(t, "KeyByHash("+string(r)+")", got, k)
		want = append(want, k)
	}
	legacy := newKey(p.ID, base.Add(time.Second))
	legacy.Role = ""
	must(t, "CreateKey without role", s.CreateKey(ctx, legacy))
	got, err := s.KeyByHash(ctx, legacy.Hash)
	must(t, "KeyByHash(no role)", err)
	if got.Role != automation.RoleAdmin {
		t.Errorf("key stored without a role: Role = %q, want %q", got.Role, automation.RoleAdmin)
	}
	legacy.Role = automation.RoleAdmin
	ks, err := s.Keys(ctx, p.ID)
	must(t, "Keys", err)
	equalKeys(t, "Keys", ks, append(want, legacy))
}

// testConnectionHosts: a connection's allowedHosts come back from the
// record and from the list; one without has none.
func testConnectionHosts(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := newProject("hosts", base)
	must(t, "create project", s.CreateProject(ctx, p))
	fenced := newConnection(p.ID, "stripe", base)
	fenced.AllowedHosts = []string{"api.stripe.com", "*.slack.com"}
	// An app connection's baseUrl comes back with it (apps.go).
	fenced.BaseURL = "https://stripe-proxy.example.com/v1"
	open := newConnection(p.ID, "open", base.Add(time.Millisecond))
	must(t, "CreateConnection fenced", s.CreateConnection(ctx, fenced))
	must(t, "CreateConnection open", s.CreateConnection(ctx, open))
	got, err := s.Connection(ctx, p.ID, fenced.ID)
	must(t, "Connection", err)
	wantSame(t, "fenced connection", got, fenced)
	got, err = s.Connection(ctx, p.ID, open.ID)
	must(t, "Connection", err)
	wantSame(t, "open connection", got, open)
	page, err := s.ListConnections(ctx, p.ID, automation.ListQuery{Limit: 10})
	must(t, "ListConnections", err)
	wantSame(t, "listed connections", page.Items, []automation.Connection{fenced, open})
}
