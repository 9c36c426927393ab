package automation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
)

// FuzzAuthenticate: API key parsing and lookup on a real SQLite store. The
// issued key authenticates its project; any other string, including the key
// with anything changed, is the one 401 UNAUTHORIZED, never another error.
func FuzzAuthenticate(f *testing.F) {
	ctx := context.Background()
	dir, err := datadir.Open(ctx, f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { dir.Close() })
	svc, err := automation.NewService(automation.Config{Store: dir.Store, Secrets: dir.Secrets, Checker: engine.Checker{}, CursorKey: dir.CursorKey})
	if err != nil {
		f.Fatal(err)
	}
	p, err := svc.CreateProject(ctx, "fuzz", automation.PlanFree)
	if err != nil {
		f.Fatal(err)
	}
	key, _, err := svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(key)
	f.Add(key + " ")
	f.Add(strings.ToUpper(key))
	f.Add(key[:len(key)-1])
	f.Add(automation.PrefixAPIKey)
	f.Add("")
	f.Add(automation.PrefixAPIKey + strings.Repeat("A", 200))
	f.Add("Bearer " + key)
	f.Fuzz(func(t *testing.T, k string) {
		got, err := svc.Authenticate(ctx, k)
		if k == key {
			if err != nil || got.ID != p.ID {
				t.Fatalf("the issued key: %v, project %q", err, got.ID)
			}
			return
		}
		var ae *automation.Error
		if err == nil || !errors.Is(err, automation.ErrUnauthorized) || !errors.As(err, &ae) || ae.Code != "UNAUTHORIZED" {
			t.Fatalf("Authenticate(%q) = %v, %v; want 401 UNAUTHORIZED", k, got.ID, err)
		}
		if len(k) >= 8 && strings.Contains(ae.Message, k) {
			t.Fatalf("the refusal echoes the key: %q", ae.Message)
		}
	})
}
