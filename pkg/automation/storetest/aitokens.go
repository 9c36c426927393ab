package storetest

import (
	"context"
	"sync"
	"testing"

	"flowservice/pkg/automation"
)

// testAITokens: a project's model tokens per day start at 0, AddAITokens
// answers the count after its add, days and projects are counted apart,
// and concurrent adds are all counted (none lost to a read-modify-write).
func testAITokens(t *testing.T, s automation.Store) {
	ctx := context.Background()
	const day, next = "2030-01-02", "2030-01-03"
	if n, err := s.AITokens(ctx, "prj_tok", day); err != nil || n != 0 {
		t.Fatalf("AITokens before any add = %d, %v; want 0, nil", n, err)
	}
	if n, err := s.AddAITokens(ctx, "prj_tok", day, 1500); err != nil || n != 1500 {
		t.Fatalf("first add = %d, %v; want 1500", n, err)
	}
	if n, err := s.AddAITokens(ctx, "prj_tok", day, 250); err != nil || n != 1750 {
		t.Fatalf("second add = %d, %v; want 1750", n, err)
	}
	if n, err := s.AddAITokens(ctx, "prj_tok", next, 7); err != nil || n != 7 {
		t.Fatalf("add on the next day = %d, %v; want 7 (days apart)", n, err)
	}
	if n, err := s.AITokens(ctx, "prj_other", day); err != nil || n != 0 {
		t.Fatalf("another project's count = %d, %v; want 0", n, err)
	}

	const workers, each, per = 8, 5, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.AddAITokens(ctx, "prj_tok", day, per); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent add: %v", err)
	}
	want := int64(1750 + workers*each*per)
	if n, err := s.AITokens(ctx, "prj_tok", day); err != nil || n != want {
		t.Fatalf("count after %d concurrent adds = %d, %v; want %d", workers*each, n, err, want)
	}
	if n, err := s.AITokens(ctx, "prj_tok", next); err != nil || n != 7 {
		t.Fatalf("next day's count = %d, %v; want 7", n, err)
	}
}
