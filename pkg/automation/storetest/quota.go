package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testFlowQuota: the flows quota holds in the create's own write: of 60
// concurrent creates against a quota of 50 exactly 50 are stored, the
// others refused QUOTA_EXCEEDED; a delete makes room for one more; a
// create without a bound is not refused.
func testFlowQuota(t *testing.T, s automation.Store) {
	ctx := context.Background()
	p := newProject("quota", now())
	must(t, "create project", s.CreateProject(ctx, p))
	const quota, creates = 50, 60
	max := int64(quota)
	errs := make([]error, creates)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range creates {
		wg.Go(func() {
			f := flowBuilderWebhook(p.ID, "f", now())
			f.MaxFlows = &max
			<-start
			errs[i] = s.CreateFlow(ctx, f)
		})
	}
	close(start)
	wg.Wait()
	var ok, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, automation.ErrForbidden):
			wantKind(t, "a create past the quota", err, automation.ErrForbidden, "QUOTA_EXCEEDED")
			refused++
		default:
			t.Errorf("a concurrent create failed otherwise: %v", err)
		}
	}
	if ok != quota || refused != creates-quota {
		t.Fatalf("%d concurrent creates against a quota of %d: %d stored, %d refused; want %d and %d",
			creates, quota, ok, refused, quota, creates-quota)
	}
	flows := countFlows(t, s, p.ID)
	if flows != quota {
		t.Fatalf("the project holds %d flows, want %d", flows, quota)
	}

	f := flowBuilderWebhook(p.ID, "one more", now())
	f.MaxFlows = &max
	wantKind(t, "a create at the quota", s.CreateFlow(ctx, f), automation.ErrForbidden, "QUOTA_EXCEEDED")
	page, err := s.ListFlows(ctx, p.ID, automation.ListQuery{Limit: 1})
	must(t, "ListFlows", err)
	must(t, "DeleteFlow", s.DeleteFlow(ctx, p.ID, page.Items[0].ID))
	must(t, "a create after a delete", s.CreateFlow(ctx, f))
	again := flowBuilderWebhook(p.ID, "and another", now())
	again.MaxFlows = &max
	wantKind(t, "a create at the quota again", s.CreateFlow(ctx, again), automation.ErrForbidden, "QUOTA_EXCEEDED")
	again.MaxFlows = nil
	must(t, "a create without a bound", s.CreateFlow(ctx, again))
}

func countFlows(t *testing.T, s automation.Store, project string) int {
	t.Helper()
	n := 0
	q := automation.ListQuery{Limit: automation.MaxPageSize}
	for {
		page, err := s.ListFlows(context.Background(), project, q)
		must(t, "ListFlows", err)
		n += len(page.Items)
		if page.Next == "" {
			return n
		}
		q.After = page.Next
	}
}

// testVersionsPruned: a publish past KeepVersions removes the oldest
// versions in its own write, but not one a RUNNING run is pinned to,
// which a later publish removes once the run is finished; pruned versions
// are gone from the list and from the project's stored bytes.
func testVersionsPruned(t *testing.T, env RunEnv) {
	ctx := context.Background()
	s := env.Store
	base := now()
	p := newProject("pruned", base)
	must(t, "create project", s.CreateProject(ctx, p))
	f := flowBuilderWebhook(p.ID, "pruned", base)
	f.LiveVersion = 1
	f.Publish = []automation.FlowVersion{versionOf(f, 1, base, "", "")}
	must(t, "CreateFlow", s.CreateFlow(ctx, f))
	measure := func(what string) int64 {
		t.Helper()
		n, err := s.StoredBytes(ctx, p.ID)
		must(t, "StoredBytes "+what, err)
		return n
	}
	before := measure("before")

	// publish makes n the live version, its definition padded by pad bytes.
	const big = 100_000
	publish := func(n int64, pad int) {
		t.Helper()
		g := getFlow(t, s, p.ID, f.ID)
		g.Steps = []automation.Step{{Name: "pad", Type: automation.StepSet,
			Values: json.RawMessage(`{"pad":"` + strings.Repeat("v", pad) + `"}`)}}
		g.Version++
		g.LiveVersion = n
		g.Publish = []automation.FlowVersion{versionOf(g, n, base.Add(time.Duration(n)*time.Second), "", "")}
		g.KeepVersions = 3
		must(t, "publish", s.PutFlow(ctx, g))
	}
	publish(2, big)
	if grown := measure("after a large version") - before; grown < big {
		t.Fatalf("stored bytes grew by %d with a %d-byte version, want at least that", grown, big)
	}
	// A run waiting on version 2 (RUNNING) keeps it.
	waiting := newRun(f, now())
	two := int64(2)
	waiting.FlowVersion = &two
	must(t, "create a run pinned to 2", env.Create(ctx, waiting))
	for n := int64(3); n <= 6; n++ {
		publish(n, 10)
	}
	kept := func(what string, want ...int64) {
		t.Helper()
		all, _ := listVersions(t, s, p.ID, f.ID, 2)
		var got []int64
		for _, v := range all {
			got = append(got, v.Version)
		}
		wantSame(t, what, got, want)
		for n := int64(1); n <= 7; n++ {
			_, err := s.FlowVersion(ctx, p.ID, f.ID, n)
			switch {
			case err == nil && !containsVersion(want, n):
				t.Errorf("%s: version %d can still be read", what, n)
			case err != nil && containsVersion(want, n):
				t.Errorf("%s: version %d: %v", what, n, err)
			}
		}
	}
	kept("versions kept past the bound, one pinned", 6, 5, 4, 2)
	if grown := measure("with version 2 pinned") - before; grown < big {
		t.Fatalf("stored bytes grew by %d while the %d-byte version is kept, want at least that", grown, big)
	}

	// Once the run is finished, the next publish prunes version 2 and its
	// bytes go.
	c, err := env.Runs.ClaimRun(ctx, p.ID, waiting.ID, now(), time.Minute)
	must(t, "claim", err)
	c.Status = automation.RunSucceeded
	must(t, "finish", env.Runs.FinishRun(ctx, c))
	publish(7, 10)
	kept("after the run finished", 7, 6, 5)
	if grown := measure("after pruning") - before; grown >= big {
		t.Fatalf("stored bytes still %d above the start after the %d-byte version was pruned", grown, big)
	}
}

func containsVersion(vs []int64, n int64) bool {
	for _, v := range vs {
		if v == n {
			return true
		}
	}
	return false
}
