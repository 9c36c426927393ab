package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqlitestore"
)

// hotStore is a store on a real file with one project, one API key and
// one flow builder flow that holds a route, for the per-request paths.
func hotStore(b *testing.B) (s *sqlitestore.Store, project, keyHash string, f automation.Flow) {
	ctx := context.Background()
	s = openAt(b, filepath.Join(b.TempDir(), "hot.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "bench", Created: now}
	if err := s.CreateProject(ctx, p); err != nil {
		b.Fatal(err)
	}
	keyHash = automation.HashAPIKey("fk_bench_key")
	if err := s.CreateKey(ctx, automation.APIKey{ID: automation.NewID(automation.PrefixKey), Project: p.ID, Hash: keyHash, Created: now}); err != nil {
		b.Fatal(err)
	}
	f = flow(p.ID, "POST", "bench/hook", now)
	if err := s.CreateFlow(ctx, f); err != nil {
		b.Fatal(err)
	}
	return s, p.ID, keyHash, f
}

func benchRun(project, flowID string) automation.Run {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: project, FlowID: flowID, Status: automation.RunRunning,
		Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + flowID,
			Headers: map[string]string{"content-type": "application/json"},
			Body:    json.RawMessage(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)},
		Created: now,
	}
}

// BenchmarkAuthenticateAndRoute is the store's share of a request's auth
// and routing: the API key by its hash, then the flows on a route.
func BenchmarkAuthenticateAndRoute(b *testing.B) {
	s, _, hash, _ := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.KeyByHash(ctx, hash); err != nil {
			b.Fatal(err)
		}
		if m, err := s.RouteFlows(ctx, "bench/hook"); err != nil || len(m) == 0 {
			b.Fatal(m, err)
		}
	}
}

// BenchmarkEnqueue is one webhook's durable write (run + queue entry, one
// fsync) from one caller at a time: no one to share a commit with.
func BenchmarkEnqueue(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Enqueue(ctx, benchRun(project, f.ID)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueueParallel is the same from 64 callers at once: group
// commit shares each fsync among the callers waiting.
func BenchmarkEnqueueParallel(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32) // 32 × GOMAXPROCS callers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Enqueue(ctx, benchRun(project, f.ID)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimFinish is a worker's writes for one run, serially: claim
// the queue entry, claim the run, finish it (with the flow's stats) and
// acknowledge the entry. The enqueue is outside the timer.
func BenchmarkClaimFinish(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := s.Enqueue(ctx, benchRun(project, f.ID)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		now := time.Now()
		e, ok, err := s.ClaimDue(ctx, now, time.Minute)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		id := e.RunID
		if e.Run == nil { // the queue claim takes the run with its entry
			b.Fatal("ClaimDue did not claim the run")
		}
		r := *e.Run
		fin := time.Now().UTC()
		r.Status, r.Finished = automation.RunSucceeded, &fin
		if err := s.FinishRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := s.Ack(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimBatchFinish is the worker pool's share of the store per
// run under load: claims of up to 64 due runs in one write, each run then
// finished from its own goroutine, the finishes sharing group commits.
func BenchmarkClaimBatchFinish(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	for range b.N {
		if err := s.Enqueue(ctx, benchRun(project, f.ID)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		es, err := s.ClaimDueBatch(ctx, time.Now(), time.Minute, 64)
		if err != nil || len(es) == 0 {
			b.Fatal(len(es), err)
		}
		errs := make(chan error, len(es))
		for _, e := range es {
			go func() {
				if e.Run == nil {
					errs <- errors.New("ClaimDueBatch did not claim the run")
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
				b.Fatal(err)
			}
		}
		done += len(es)
	}
}

// BenchmarkInlineRun is the store's share of an ON_COMPLETION run executed
// by its receiver: the run enqueued claimed, then finished (two commits).
func BenchmarkInlineRun(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := s.EnqueueClaimed(ctx, benchRun(project, f.ID), time.Now(), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		fin := time.Now().UTC()
		r.Status, r.Finished = automation.RunSucceeded, &fin
		if err := s.FinishRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
