package pgstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/pgstore"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", for ANALYZE
)

// The write lock's ceiling: every write transaction of every node takes
// one advisory lock (writeLock), so a second store (a second node) on the
// same database adds callers, not write throughput. These benchmarks
// measure durable enqueues and the worker pool's claim-and-finish with one
// and with two stores on one schema of the throwaway cluster, as runs/s.
// Reproduce with:
//
//	go test -run '^$' -bench '^BenchmarkPg' -benchtime 3000x ./pkg/pgstore

// benchNodes opens n stores on one new schema with a project and a flow.
func benchNodes(b testing.TB, n int) ([]*pgstore.Store, automation.Flow) {
	b.Helper()
	ctx := context.Background()
	first := open(b)
	stores := []*pgstore.Store{first}
	for range n - 1 {
		s, err := pgstore.Open(ctx, first.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	now := time.Now().UTC()
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "bench", Plan: automation.PlanTeam, Created: now}
	if err := first.CreateProject(ctx, p); err != nil {
		b.Fatal(err)
	}
	f := automation.Flow{ID: automation.NewID(automation.PrefixFlow), Project: p.ID, Name: "hook",
		Status: automation.FlowActive, Engine: automation.FlowBuilder, TriggerType: automation.TriggerWebhook,
		Created: now, Updated: now, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}},
		Steps:   []automation.Step{{Name: "set", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)}}}
	if err := first.CreateFlow(ctx, f); err != nil {
		b.Fatal(err)
	}
	return stores, f
}

func benchRun(f automation.Flow) automation.Run {
	return automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID, Status: automation.RunRunning,
		Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
			Headers: map[string]string{"content-type": "application/json"},
			Body:    json.RawMessage(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)},
		Created: time.Now().UTC().Truncate(time.Millisecond), Steps: []automation.StepResult{},
	}
}

// BenchmarkPgEnqueue: b.N durable enqueues from 16 callers per store (the
// receivers of a busy node), spread over 1 or 2 stores.
func BenchmarkPgEnqueue(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("stores=%d", n), func(b *testing.B) {
			stores, f := benchNodes(b, n)
			ctx := context.Background()
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i := range 16 * n {
				s := stores[i%n]
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := s.Enqueue(ctx, benchRun(f)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
		})
	}
}

// BenchmarkPgClaimFinish: b.N runs enqueued beforehand (not timed), then
// each store claims batches of up to 16 (a node's idle workers) and
// finishes every run of a batch from its own goroutine, as the worker
// pool does, until the queue is empty.
func BenchmarkPgClaimFinish(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("stores=%d", n), func(b *testing.B) {
			stores, f := benchNodes(b, n)
			ctx := context.Background()
			for range b.N {
				if err := stores[0].Enqueue(ctx, benchRun(f)); err != nil {
					b.Fatal(err)
				}
			}
			var done atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, s := range stores {
				wg.Go(func() {
					for done.Load() < int64(b.N) {
						es, err := s.ClaimDueBatch(ctx, time.Now(), time.Minute, 16)
						if err != nil {
							b.Error(err)
							return
						}
						if len(es) == 0 {
							// The other store holds the rest: poll, as
							// an idle worker pool does, without taking
							// the write lock in a tight loop. A benchmark,
							// not a test: no assertion waits on this.
							time.Sleep(time.Millisecond)
							continue
						}
						errs := make(chan error, len(es))
						for _, e := range es {
							go func() {
								if e.Run == nil {
									errs <- errors.New("the batch did not claim the run")
									return
								}
								r := *e.Run
								fin := time.Now().UTC()
								r.Status, r.Finished = automation.RunSucceeded, &fin
								errs <- s.FinishRun(ctx, r)
							}()
						}
						for range es {
							if err := <-errs; err != nil {
								b.Error(err)
								return
							}
						}
						done.Add(int64(len(es)))
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
		})
	}
}

// BenchmarkPgClaimBacklog: one claim of a batch of 16 from a queue of
// 5,000 due runs, the statistics up to date (as autovacuum keeps them): the
// time the claim holds the write lock, which every node's writes wait on.
// Each claim takes the same oldest entries again, their leases run out
// between claims, so the backlog stays.
func BenchmarkPgClaimBacklog(b *testing.B) {
	stores, f := benchNodes(b, 1)
	s := stores[0]
	ctx := context.Background()
	for range 5000 {
		if err := s.Enqueue(ctx, benchRun(f)); err != nil {
			b.Fatal(err)
		}
	}
	db, err := sql.Open("pgx", s.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ANALYZE run_queue; ANALYZE runs`); err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	b.ResetTimer()
	for b.Loop() {
		at = at.Add(time.Second)
		es, err := s.ClaimDueBatch(ctx, at, time.Millisecond, 16)
		if err != nil || len(es) != 16 {
			b.Fatal(len(es), err)
		}
	}
}
