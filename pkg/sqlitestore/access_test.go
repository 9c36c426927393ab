package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestAuditRetention: entries older than automation.AuditRetention are
// dropped as newer ones are written.
func TestAuditRetention(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "flows.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	entry := func(at time.Time) automation.AuditEntry {
		return automation.AuditEntry{ID: automation.NewID(automation.PrefixAudit), Project: "prj_1", Time: at,
			Action: "flow.update", Resource: automation.AuditResource{Type: "flow", ID: "flw_1"}}
	}
	old, recent := entry(now.Add(-automation.AuditRetention-time.Hour)), entry(now)
	for _, e := range []automation.AuditEntry{old, recent} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.AuditLog(ctx, "prj_1", automation.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != recent.ID {
		t.Errorf("audit log = %+v, want only the recent entry %s", page.Items, recent.ID)
	}
}
