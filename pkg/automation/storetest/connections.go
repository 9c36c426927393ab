package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

func newConnection(project, name string, created time.Time) automation.Connection {
	return automation.Connection{
		ID: automation.NewID(automation.PrefixConnection), Project: project, Name: name,
		App: "github", Type: automation.ConnectionAPIKey, Status: automation.ConnectionActive,
		Created: created, Updated: created,
	}
}

func equalConnection(t *testing.T, what string, got, want automation.Connection) {
	t.Helper()
	wantSame(t, what, got, want)
}

func getConnection(t *testing.T, s automation.Store, project, id string) automation.Connection {
	t.Helper()
	c, err := s.Connection(context.Background(), project, id)
	if err != nil {
		t.Fatalf("Connection(%s): %v", id, err)
	}
	return c
}

func testConnections(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	c1 := newConnection(p1, "GitHub deploys", base)
	c2 := newConnection(p2, "Slack", base.Add(time.Millisecond))
	c2.App, c2.Type = "slack", automation.ConnectionOAuth2
	must(t, "create c1", s.CreateConnection(ctx, c1))
	must(t, "create c2", s.CreateConnection(ctx, c2))
	equalConnection(t, "Connection(c1)", getConnection(t, s, p1, c1.ID), c1)
	equalConnection(t, "Connection(c2)", getConnection(t, s, p2, c2.ID), c2)

	unknown := automation.NewID(automation.PrefixConnection)
	notFound := []struct {
		name string
		err  error
	}{
		{"Connection of another project", func() error { _, err := s.Connection(ctx, p2, c1.ID); return err }()},
		{"Connection(unknown)", func() error { _, err := s.Connection(ctx, p1, unknown); return err }()},
		{"SetConnectionStatus of another project",
			s.SetConnectionStatus(ctx, p2, c1.ID, automation.ConnectionRevoked, base.Add(time.Hour))},
		{"SetConnectionStatus(unknown)",
			s.SetConnectionStatus(ctx, p1, unknown, automation.ConnectionRevoked, base.Add(time.Hour))},
		{"DeleteConnection of another project", s.DeleteConnection(ctx, p2, c1.ID)},
		{"DeleteConnection(unknown)", s.DeleteConnection(ctx, p1, unknown)},
	}
	for _, tt := range notFound {
		wantKind(t, tt.name, tt.err, automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	}
	// None of those touched c1.
	equalConnection(t, "c1 after another project's calls", getConnection(t, s, p1, c1.ID), c1)

	// A status change records when it happened and nothing else.
	for i, st := range []automation.ConnectionStatus{
		automation.ConnectionError, automation.ConnectionActive, automation.ConnectionExpired, automation.ConnectionRevoked,
	} {
		at := base.Add(time.Duration(i+1) * time.Minute)
		must(t, "SetConnectionStatus "+string(st), s.SetConnectionStatus(ctx, p1, c1.ID, st, at))
		want := c1
		want.Status, want.Updated = st, at
		equalConnection(t, "after SetConnectionStatus "+string(st), getConnection(t, s, p1, c1.ID), want)
	}
	equalConnection(t, "c2 after c1's changes", getConnection(t, s, p2, c2.ID), c2)

	must(t, "DeleteConnection", s.DeleteConnection(ctx, p1, c1.ID))
	_, err := s.Connection(ctx, p1, c1.ID)
	wantKind(t, "Connection after delete", err, automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	wantKind(t, "DeleteConnection again", s.DeleteConnection(ctx, p1, c1.ID), automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	equalConnection(t, "c2 after deleting c1", getConnection(t, s, p2, c2.ID), c2)
}

func connectionIDs(cs []automation.Connection) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

func testListConnections(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	var want []automation.Connection
	for i := range 33 {
		created := base.Add(time.Duration(i) * time.Millisecond)
		if i%4 == 1 {
			must(t, "create p2 connection", s.CreateConnection(ctx, newConnection(p2, fmt.Sprintf("other %d", i), created)))
			continue
		}
		c := newConnection(p1, fmt.Sprintf("conn %02d", i), created)
		must(t, "create p1 connection", s.CreateConnection(ctx, c))
		want = append(want, c)
	}
	if len(want) != 25 {
		t.Fatalf("setup made %d connections, want 25", len(want))
	}
	for _, limit := range []int{7, 5, 1, 25, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got, sizes := walk(t, "ListConnections", func(after string) (automation.Page[automation.Connection], error) {
				return s.ListConnections(ctx, p1, automation.ListQuery{Limit: limit, After: after})
			})
			if ws := pageSizes(len(want), limit); !slices.Equal(sizes, ws) {
				t.Errorf("page sizes = %v, want %v", sizes, ws)
			}
			if g, w := connectionIDs(got), connectionIDs(want); !slices.Equal(g, w) {
				t.Fatalf("walked IDs = %v\nwant (creation order) %v", g, w)
			}
			for i := range want {
				equalConnection(t, fmt.Sprintf("item %d", i), got[i], want[i])
			}
		})
	}
	page, err := s.ListConnections(ctx, automation.NewID(automation.PrefixProject), automation.ListQuery{Limit: 10})
	must(t, "ListConnections(empty project)", err)
	if len(page.Items) != 0 || page.Next != "" {
		t.Errorf("empty project: %d items, Next %q; want none and \"\"", len(page.Items), page.Next)
	}
}
