package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// BenchmarkListFlows pages through a project of 10k flows (beside another
// project's 10k) 100 at a time, from the start, the middle and the end, with
// and without a status filter: the cost of a page must not grow with the
// position or with the number of rows.
func BenchmarkListFlows(b *testing.B) {
	ctx := context.Background()
	s := openAt(b, filepath.Join(b.TempDir(), "bench.db"))
	project, other := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	now := time.Now().UTC().Truncate(time.Millisecond)
	const n = 10_000
	var positions []string // Next of every page, for starting mid-list
	for i := range n {
		for _, p := range []string{project, other} {
			f := flow(p, "POST", fmt.Sprintf("%s/%d", p, i), now)
			if i%2 == 0 {
				f.Status = automation.FlowActive
			}
			if err := s.CreateFlow(ctx, f); err != nil {
				b.Fatal(err)
			}
		}
	}
	after := ""
	for {
		page, err := s.ListFlows(ctx, project, automation.ListQuery{Limit: 100, After: after})
		if err != nil {
			b.Fatal(err)
		}
		if page.Next == "" {
			break
		}
		positions = append(positions, page.Next)
		after = page.Next
	}
	if len(positions) != n/100-1 {
		b.Fatalf("%d pages, want %d", len(positions)+1, n/100)
	}

	for _, bc := range []struct {
		name, after, status string
	}{
		{"first", "", ""},
		{"middle", positions[len(positions)/2], ""},
		{"last", positions[len(positions)-1], ""},
		{"first/ACTIVE", "", "ACTIVE"},
		{"middle/ACTIVE", positions[len(positions)/2], "ACTIVE"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListFlows(ctx, project, automation.ListQuery{Limit: 100, After: bc.after, Status: bc.status})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Items) != 100 {
					b.Fatalf("%d items", len(page.Items))
				}
			}
		})
	}
}
