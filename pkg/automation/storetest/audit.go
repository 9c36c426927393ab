package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"flowservice/pkg/automation"
)

func newAuditEntry(project, action string, at time.Time) automation.AuditEntry {
	return automation.AuditEntry{
		ID: automation.NewID(automation.PrefixAudit), Project: project, Time: at,
		Actor:  automation.AuditActor{KeyID: automation.NewID(automation.PrefixKey), Role: automation.RoleEditor},
		Action: action, Resource: automation.AuditResource{Type: "flow", ID: automation.NewID(automation.PrefixFlow)},
		RequestID: "req-" + action, SourceIP: "198.51.100.7",
	}
}

// auditLog reads a project's whole log, page by page.
func auditLog(t *testing.T, s automation.Store, project string, q automation.AuditQuery) []automation.AuditEntry {
	t.Helper()
	var all []automation.AuditEntry
	for i := 0; i < 100; i++ {
		page, err := s.AuditLog(context.Background(), project, q)
		must(t, "AuditLog", err)
		if len(page.Items) > q.Limit {
			t.Fatalf("AuditLog returned %d entries for limit %d", len(page.Items), q.Limit)
		}
		all = append(all, page.Items...)
		if page.Next == "" {
			return all
		}
		q.After = page.Next
	}
	t.Fatal("AuditLog pages never end")
	return nil
}

// testAuditLog: entries come back whole, newest first, each once across
// pages, per project, within since and until.
func testAuditLog(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := newProject("one", base), newProject("two", base)
	must(t, "create p1", s.CreateProject(ctx, p1))
	must(t, "create p2", s.CreateProject(ctx, p2))
	var want []automation.AuditEntry
	for i := 0; i < 5; i++ {
		e := newAuditEntry(p1.ID, "flow.update", base.Add(time.Duration(i)*time.Second))
		must(t, "AppendAudit", s.AppendAudit(ctx, e))
		want = append([]automation.AuditEntry{e}, want...) // newest first
	}
	must(t, "AppendAudit other project", s.AppendAudit(ctx, newAuditEntry(p2.ID, "flow.create", base)))

	got := auditLog(t, s, p1.ID, automation.AuditQuery{Limit: 2})
	wantSame(t, "audit log", got, want)
	got = auditLog(t, s, p1.ID, automation.AuditQuery{Limit: 10, Since: base.Add(time.Second), Until: base.Add(3 * time.Second)})
	wantSame(t, "audit log since..until", got, want[2:4])
	got = auditLog(t, s, p1.ID, automation.AuditQuery{Limit: 10, Until: base.Add(time.Second)})
	wantSame(t, "audit log until", got, want[4:])
	got = auditLog(t, s, automation.NewID(automation.PrefixProject), automation.AuditQuery{Limit: 10})
	if len(got) != 0 {
		t.Errorf("audit log of an unknown project: %v", got)
	}
}

// testAuditInTheChange: a write whose context carries an entry writes it
// in the same commit; a write that fails writes none; a second write of
// the same request keeps one entry.
func testAuditInTheChange(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := newProject("audited", base)
	must(t, "create project", s.CreateProject(ctx, p))

	c := newConnection(p.ID, "stripe", base)
	create := newAuditEntry(p.ID, "connection.create", base)
	create.Resource = automation.AuditResource{Type: "connection", ID: c.ID}
	must(t, "CreateConnection audited", s.CreateConnection(automation.WithAudit(ctx, create), c))

	dup := newAuditEntry(p.ID, "connection.create", base.Add(time.Second))
	if err := s.CreateConnection(automation.WithAudit(ctx, dup), c); err == nil {
		t.Fatal("CreateConnection of an existing ID succeeded")
	}

	f := flowBuilderWebhook(p.ID, "audited", base)
	fe := newAuditEntry(p.ID, "flow.create", base.Add(2*time.Second))
	fctx := automation.WithAudit(ctx, fe)
	must(t, "CreateFlow audited", s.CreateFlow(fctx, f))
	must(t, "ArmCapture in the same request", s.ArmCapture(fctx, p.ID, f.ID, base.Add(time.Hour)))

	del := newAuditEntry(p.ID, "flow.delete", base.Add(3*time.Second))
	must(t, "DeleteFlow audited", s.DeleteFlow(automation.WithAudit(ctx, del), p.ID, f.ID))
	gone := newAuditEntry(p.ID, "flow.delete", base.Add(4*time.Second))
	wantKind(t, "DeleteFlow of a deleted flow", s.DeleteFlow(automation.WithAudit(ctx, gone), p.ID, f.ID), automation.ErrNotFound, "")

	// Plain writes record nothing.
	must(t, "CreateConnection unaudited", s.CreateConnection(ctx, newConnection(p.ID, "plain", base)))

	got := auditLog(t, s, p.ID, automation.AuditQuery{Limit: 10})
	wantSame(t, "entries of the changes", got, []automation.AuditEntry{del, fe, create}, cmpopts.EquateEmpty())
}

// testAuditVariables: a variables change whose context carries an entry
// writes it in the change's own write; a change refused by its function
// writes none.
func testAuditVariables(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := newProject("audited-vars", base)
	must(t, "create project", s.CreateProject(ctx, p))
	put := newAuditEntry(p.ID, "variable.put", base)
	put.Resource = automation.AuditResource{Type: "variable", ID: "REGION"}
	must(t, "UpdateVariables audited", s.UpdateVariables(automation.WithAudit(ctx, put), p.ID,
		func(m map[string]automation.Variable) (map[string]automation.Variable, error) {
			eu := "eu"
			m["REGION"] = automation.Variable{Name: "REGION", Value: &eu, Created: base, Updated: base}
			return m, nil
		}))
	refused := newAuditEntry(p.ID, "variable.delete", base.Add(time.Second))
	boom := automation.Invalid("no")
	if err := s.UpdateVariables(automation.WithAudit(ctx, refused), p.ID,
		func(map[string]automation.Variable) (map[string]automation.Variable, error) { return nil, boom }); err != boom {
		t.Fatalf("a refused change: err = %v, want its own error", err)
	}
	got := auditLog(t, s, p.ID, automation.AuditQuery{Limit: 10})
	wantSame(t, "entries of variable changes", got, []automation.AuditEntry{put}, cmpopts.EquateEmpty())
}
