package automation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// FuzzAuthenticate: API key parsing and lookup on a real SQLite store. The
// issued key authenticates its project; any other string, including the key
// with anything changed, is the one 401 UNAUTHORIZED, never another error.
func FuzzAuthenticate(f *testing.F) {
	ctx := context.Background()
	env := flowtest.New(f, flowtest.Options{})
	svc := env.Svc
	p, key := env.Project(f, "fuzz", automation.PlanFree)
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
