package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
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
		{"runs of a flow", listRunsSQL, "runs_flow", []any{"p", "f", 1 << 62, 101}},
		{"runs of a flow by status", listRunsByStatusSQL, "runs_flow_status", []any{"p", "f", "FAILED", 1 << 62, 101}},
	}
	// The run search, by its filters.
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range []struct {
		name, index string
		q           automation.RunQuery
	}{
		{"search", "runs_project", automation.RunQuery{}},
		{"search by status", "runs_project_status", automation.RunQuery{ListQuery: automation.ListQuery{Status: "FAILED"}}},
		{"search by flow", "runs_flow", automation.RunQuery{FlowID: "f"}},
		{"search by flow and status", "runs_flow_status", automation.RunQuery{FlowID: "f", ListQuery: automation.ListQuery{Status: "FAILED"}}},
		{"search in a window", "runs_created", automation.RunQuery{Since: at, Until: at.Add(time.Hour)}},
		{"search since, by status, after a position", "runs_created",
			automation.RunQuery{Since: at, ListQuery: automation.ListQuery{Status: "FAILED", After: "1767225600000.42"}}},
		{"search until, by flow", "runs_created", automation.RunQuery{Until: at, FlowID: "f"}},
	} {
		query, args, _, err := searchSQL("p", st.q)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name, query, index string
			args               []any
		}{st.name, query, st.index, args})
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
