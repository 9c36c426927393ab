package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestListPlans checks that every list query is a range scan of its
// (project[, status], seq) index, so that a page costs the same wherever it
// starts and however many rows the table holds: no full scan, no sort.
func TestListPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name, query, index string
		args               []any
	}{
		{"flows", listFlowsSQL, "flows_project", []any{"p", 0, 11}},
		{"flows by status", listFlowsByStatusSQL, "flows_project_status", []any{"p", "ACTIVE", 0, 11}},
		{"connections", listConnectionsSQL, "connections_project", []any{"p", 0, 11}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+tt.query, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			p := strings.Join(plan, "; ")
			if !strings.Contains(p, "USING INDEX "+tt.index+" (") || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("plan = %q, want a search of %s and no sort", p, tt.index)
			}
			t.Logf("plan: %s", p)
		})
	}
}
