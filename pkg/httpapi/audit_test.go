package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestEveryWriteRouteIsAudited: every route that may change something (any
// method but GET and HEAD) has an audit action, so a new write route
// cannot ship unrecorded. /mcp is not a write of its own: its reads
// (initialize, tools/list) would flood the log, and what a tools/call
// changes is a run, recorded with trigger.caller {"mcp": true}, as a
// webhook's run is.
func TestEveryWriteRouteIsAudited(t *testing.T) {
	a := NewAPI(nil, nil).(*API)
	n := 0
	for _, rt := range a.routes() {
		method, _, _ := strings.Cut(rt.pattern, " ")
		if rt.public || rt.protocol || method == http.MethodGet || method == http.MethodHead {
			continue
		}
		n++
		act, ok := routeAudit[rt.pattern]
		if !ok {
			t.Errorf("write route %s has no audit action in routeAudit", rt.pattern)
			continue
		}
		if !strings.Contains(act.action, ".") || act.resource == "" {
			t.Errorf("%s: audit action %+v: want resource.verb and a resource type", rt.pattern, act)
		}
		if act.idParam != "" && !strings.Contains(rt.pattern, "{"+act.idParam+"}") {
			t.Errorf("%s: audit resource ID from {%s}, which the path lacks", rt.pattern, act.idParam)
		}
	}
	if n == 0 {
		t.Fatal("no write routes found")
	}
	for pattern := range routeAudit {
		if !a.patterns[pattern] {
			t.Errorf("routeAudit names %s, which the API does not serve", pattern)
		}
	}
}

type auditView struct {
	ID    string `json:"id"`
	Time  string `json:"time"`
	Actor struct {
		KeyID string `json:"keyId"`
		Role  string `json:"role"`
	} `json:"actor"`
	Action   string `json:"action"`
	Resource struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"resource"`
	RequestID string `json:"requestId"`
	SourceIP  string `json:"sourceIp"`
}

type auditPage struct {
	Data    []auditView `json:"data"`
	Cursor  *string     `json:"cursor"`
	HasMore bool        `json:"hasMore"`
}

// TestAuditLogRecordsWrites: each write that changed something is in the
// log with who made it, newest first, with its request ID and the client's
// address; refused and invalid requests leave nothing; pages walk it once.
func TestAuditLogRecordsWrites(t *testing.T) {
	srv, _ := newTestServer(t)
	ctx := context.Background()
	p, err := srv.svc.CreateProject(ctx, "audited", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	keys, ids := map[automation.Role]string{}, map[automation.Role]string{}
	for _, r := range automation.Roles {
		key, k, err := srv.svc.CreateAPIKeyWithRole(ctx, p.ID, r)
		if err != nil {
			t.Fatal(err)
		}
		keys[r], ids[r] = key, k.ID
	}
	editor, operator, viewer := keys[automation.RoleEditor], keys[automation.RoleOperator], keys[automation.RoleViewer]

	create := call(t, srv, "POST", "/api/v1/flows", editor, flowBuilderBody)
	var f flowView
	create.into(t, http.StatusCreated, &f)
	call(t, srv, "POST", "/api/v1/flows/"+f.ID, editor, `{"name":"Renamed"}`).into(t, http.StatusOK, &flowView{})
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", operator, "").into(t, http.StatusOK, &flowView{})
	var c struct{ ID string }
	call(t, srv, "POST", "/api/v1/connections", editor, `{"name":"stripe","app":"stripe","type":"API_KEY","value":{"apiKey":"sk_test_1"}}`).
		into(t, http.StatusCreated, &c)
	// Nothing changes: no entry.
	call(t, srv, "POST", "/api/v1/flows/"+f.ID, viewer, `{"name":"x"}`).wantError(t, http.StatusForbidden, "FORBIDDEN")
	call(t, srv, "POST", "/api/v1/flows", editor, `{"name":"x","engine":"ZAPIER"}`).wantError(t, http.StatusBadRequest, "")
	call(t, srv, "DELETE", "/api/v1/flows/flw_nosuchflow", editor, "").wantError(t, http.StatusNotFound, "")
	del := call(t, srv, "DELETE", "/api/v1/connections/"+c.ID, editor, "")
	if del.status != http.StatusNoContent {
		t.Fatalf("delete connection = %d %s", del.status, del.body)
	}

	var page auditPage
	call(t, srv, "GET", "/api/v1/audit?limit=100", viewer, "").into(t, http.StatusOK, &page)
	want := []struct {
		action, typ, id string
		role            automation.Role
	}{
		{"connection.delete", "connection", c.ID, automation.RoleEditor},
		{"connection.create", "connection", c.ID, automation.RoleEditor},
		{"flow.enable", "flow", f.ID, automation.RoleOperator},
		{"flow.update", "flow", f.ID, automation.RoleEditor},
		{"flow.create", "flow", f.ID, automation.RoleEditor},
	}
	if len(page.Data) != len(want) {
		t.Fatalf("audit log has %d entries, want %d: %+v", len(page.Data), len(want), page.Data)
	}
	for i, w := range want {
		e := page.Data[i]
		if e.Action != w.action || e.Resource.Type != w.typ || e.Resource.ID != w.id ||
			e.Actor.Role != string(w.role) || e.Actor.KeyID != ids[w.role] ||
			!strings.HasPrefix(e.ID, automation.PrefixAudit) || e.SourceIP != "127.0.0.1" || !strings.HasSuffix(e.Time, "Z") {
			t.Errorf("entry %d = %+v, want %+v by key %s from 127.0.0.1", i, e, w, ids[w.role])
		}
	}
	if got := page.Data[4].RequestID; got == "" || got != create.header.Get("X-Request-Id") {
		t.Errorf("flow.create requestId %q, the request's X-Request-Id %q", got, create.header.Get("X-Request-Id"))
	}

	// Pages of one walk the log once, in order.
	var walked []string
	cursor := ""
	for i := 0; i < 10; i++ {
		var pg auditPage
		call(t, srv, "GET", "/api/v1/audit?limit=2"+cursor, viewer, "").into(t, http.StatusOK, &pg)
		for _, e := range pg.Data {
			walked = append(walked, e.ID)
		}
		if !pg.HasMore {
			break
		}
		cursor = "&cursor=" + *pg.Cursor
	}
	if len(walked) != len(want) {
		t.Errorf("paging walked %d entries, want %d", len(walked), len(want))
	}
	for i := range walked {
		if walked[i] != page.Data[i].ID {
			t.Errorf("page walk[%d] = %s, want %s", i, walked[i], page.Data[i].ID)
		}
	}

	// Another project sees none of it; bad parameters name themselves.
	var other auditPage
	call(t, srv, "GET", "/api/v1/audit", newProjectKey(t, srv, automation.PlanFree), "").into(t, http.StatusOK, &other)
	if len(other.Data) != 0 {
		t.Errorf("another project's audit log: %+v", other.Data)
	}
	if e := call(t, srv, "GET", "/api/v1/audit?since=yesterday", viewer, "").wantError(t, http.StatusBadRequest, "INVALID_PARAMETER"); !strings.Contains(e.Message, "since") {
		t.Errorf("bad since: %q", e.Message)
	}
	call(t, srv, "GET", "/api/v1/audit?cursor=forged.x", viewer, "").wantError(t, http.StatusBadRequest, "INVALID_CURSOR")
	var none auditPage
	call(t, srv, "GET", "/api/v1/audit?until=2000-01-01T00:00:00Z", viewer, "").into(t, http.StatusOK, &none)
	if len(none.Data) != 0 {
		t.Errorf("entries before 2000: %+v", none.Data)
	}
}

// unauditedStore makes connections through a store write that records no
// audit entry, as a store method written before the audit log would.
type unauditedStore struct{ automation.Store }

func (s unauditedStore) CreateConnection(ctx context.Context, c automation.Connection) error {
	return s.Store.CreateConnection(context.Background(), c)
}

// TestAuditFallback: a write that succeeded without an audited store write
// taking its entry still lands in the log (written after the change, and
// logged as an error); one that failed leaves nothing.
func TestAuditFallback(t *testing.T) {
	env := flowtest.New(t, flowtest.Options{Store: func(s automation.Store) automation.Store { return unauditedStore{s} }})
	p, key := env.Project(t, "p", automation.PlanFree)
	logs := &syncBuffer{}
	srv := serve(t, NewAPI(env.Svc, slog.New(slog.NewJSONHandler(logs, nil))))
	var c struct{ ID string }
	call(t, srv, "POST", "/api/v1/connections", key, `{"name":"s","app":"s","type":"API_KEY","value":{"apiKey":"k"}}`).
		into(t, http.StatusCreated, &c)
	call(t, srv, "POST", "/api/v1/connections", key, `{"name":"s","app":"s","type":"API_KEY","value":{}}`).
		wantError(t, http.StatusBadRequest, "")
	l, err := env.Svc.AuditLog(context.Background(), p, automation.AuditSearch{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 1 || l.Data[0].Action != "connection.create" || l.Data[0].Resource.ID != c.ID {
		t.Errorf("audit log = %+v, want the one connection.create", l.Data)
	}
	if !strings.Contains(logs.String(), "audit entry written after its change") {
		t.Errorf("the fallback was not logged: %s", logs)
	}
}

// TestAuditSourceBehindProxy: with a trusted proxy in front, the audit log
// names the client the proxy saw, not the proxy; a client's own
// X-Forwarded-For is not believed from an untrusted peer.
func TestAuditSourceBehindProxy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
		want    string
	}{
		{"trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.9"},
		{"no trusted proxy", nil, "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := flowtest.New(t, flowtest.Options{})
			p, key := env.Project(t, "p", automation.PlanFree)
			srv := serve(t, NewAPI(env.Svc, nil, WithClientIP(TrustedClientIP(tt.trusted))))
			call(t, srv, "POST", "/api/v1/flows", key, flowBuilderBody, "X-Forwarded-For: 203.0.113.9").into(t, http.StatusCreated, &flowView{})
			l, err := env.Svc.AuditLog(context.Background(), p, automation.AuditSearch{})
			if err != nil || len(l.Data) != 1 || l.Data[0].SourceIP != tt.want {
				t.Errorf("audit log = %+v, %v; want sourceIp %s", l.Data, err, tt.want)
			}
		})
	}
}
