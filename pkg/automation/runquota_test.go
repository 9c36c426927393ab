package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// recordingQueue passes runs to the store's queue and keeps their IDs.
type recordingQueue struct {
	automation.RunQueue
	mu  sync.Mutex
	ids []string
}

func (q *recordingQueue) Enqueue(ctx context.Context, r automation.Run) error {
	err := q.RunQueue.Enqueue(ctx, r)
	if err == nil {
		q.mu.Lock()
		q.ids = append(q.ids, r.ID)
		q.mu.Unlock()
	}
	return err
}

func (q *recordingQueue) started() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.ids...)
}

// TestRunsPerMinuteBoundsASelfCallingLoop: a flow that calls itself with
// CALL_FLOW wait: false inside a FOR_EACH, on a FREE project (120 runs a
// minute), executed until no run is left, starts at most 120 runs within
// one minute of the service clock (which stands still): the calls past
// the quota fail their step with QUOTA_EXCEEDED, so the loop ends. Then a
// delivery is refused with RetryAfter the rest of the minute, GET
// /api/v1/project's usage says 120, and in the next minute runs start
// again.
func TestRunsPerMinuteBoundsASelfCallingLoop(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 12, 0, 15, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	q := &recordingQueue{}
	fe := flowtest.New(t, flowtest.Options{Clock: clock, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		q.RunQueue = s
		return q
	}})
	ctx := context.Background()
	p, _ := fe.Project(t, "free", automation.PlanFree)
	no := false
	loop := fe.ActiveFlow(t, p, "loop", automation.Step{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`[1, 2, 3]`),
		Steps: []automation.Step{{Name: "again", Type: automation.StepCallFlow, Flow: "loop", Wait: &no}}})
	fe.StartRef(t, loop)

	quotaFailures := 0
	for done := 0; done < len(q.started()); done++ {
		if done > 1000 {
			t.Fatalf("over 1000 runs started: the loop is not bounded")
		}
		at, err := fe.Svc.ExecuteRun(ctx, p.ID, q.started()[done])
		if err != nil {
			t.Fatalf("run %d: %v", done, err)
		}
		if strings.Contains(at.Run.Error, "QUOTA_EXCEEDED") {
			quotaFailures++
		}
	}
	const quota = 120
	if got := len(q.started()); got != quota || quotaFailures == 0 {
		t.Fatalf("the loop started %d runs in one minute (%d failed on the quota); want exactly the FREE quota, %d", got, quotaFailures, quota)
	}
	var failed automation.Run
	for _, id := range q.started() {
		r, err := fe.Svc.Run(ctx, p, loop.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == automation.RunFailed {
			failed = r
			break
		}
	}
	if st := failed.Steps; len(st) == 0 || !strings.Contains(st[len(st)-1].Error, "QUOTA_EXCEEDED: the project starts at most 120 runs a minute on its FREE plan (limits.runsPerMinute)") {
		t.Errorf("a failed run's steps: %+v; want the call's step failed with QUOTA_EXCEEDED naming limits.runsPerMinute", failed.Steps)
	}

	_, err := fe.Svc.StartRun(ctx, loop, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	var rl *automation.RateLimited
	if !errors.As(err, &rl) || rl.Err.Code != "QUOTA_EXCEEDED" || rl.RetryAfter != 45*time.Second || !automation.IsRunQuotaExceeded(err) {
		t.Fatalf("a delivery over the quota = %v; want QUOTA_EXCEEDED, retry after the 45 s left of the minute", err)
	}
	if info, err := fe.Svc.ProjectInfo(ctx, p); err != nil || info.Usage.RunsPerMinute != quota || *info.Limits.RunsPerMinute != quota {
		t.Errorf("project info = %+v, %v; want runsPerMinute %d of %d", info, err, info.Usage.RunsPerMinute, quota)
	}
	mu.Lock()
	now = now.Add(45 * time.Second)
	mu.Unlock()
	if _, err := fe.Svc.StartRun(ctx, loop, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("a delivery in the next minute = %v", err)
	}
}

// sharedBuckets is a RateBuckets in memory, as the stores' shared buckets
// behave (automation.BucketLevel's arithmetic): what the instances of a
// cluster or of Lambda take from.
type sharedBuckets struct {
	mu    sync.Mutex
	tat   map[string]int64
	takes int
}

func (b *sharedBuckets) Take(_ context.Context, key string, rate float64, burst int64, now time.Time) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, wait := automation.BucketLevel(b.tat[key], now.UnixMicro(), rate, burst); wait > 0 {
		return wait, nil
	}
	interval, _ := automation.BucketInterval(rate, burst)
	b.tat[key] = max(b.tat[key], now.UnixMicro()) + interval
	b.takes++
	return 0, nil
}

func (b *sharedBuckets) Peek(_ context.Context, key string, rate float64, burst int64, now time.Time) (int64, time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, wait := automation.BucketLevel(b.tat[key], now.UnixMicro(), rate, burst)
	return n, wait, nil
}

// TestRunsPerMinuteOnSharedBuckets: where instances share the store
// (Lambda, a cluster on PostgreSQL) runsPerMinute is the project's shared
// bucket, not each instance's count: the self-calling loop of the test
// above starts exactly the FREE quota (120) at one instant, each start
// one take; a delivery past it waits for a token (Retry-After the half
// second one takes, at least a second); usage reports the starts the
// bucket holds; half a minute later half the quota starts again; an
// ENTERPRISE project takes nothing.
func TestRunsPerMinuteOnSharedBuckets(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 12, 0, 15, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	q := &recordingQueue{}
	buckets := &sharedBuckets{tat: map[string]int64{}}
	fe := flowtest.New(t, flowtest.Options{Clock: clock, RateBuckets: buckets, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		q.RunQueue = s
		return q
	}})
	ctx := context.Background()
	p, _ := fe.Project(t, "free", automation.PlanFree)
	no := false
	loop := fe.ActiveFlow(t, p, "loop", automation.Step{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`[1, 2, 3]`),
		Steps: []automation.Step{{Name: "again", Type: automation.StepCallFlow, Flow: "loop", Wait: &no}}})
	fe.StartRef(t, loop)
	for done := 0; done < len(q.started()); done++ {
		if done > 1000 {
			t.Fatalf("over 1000 runs started: the loop is not bounded")
		}
		if _, err := fe.Svc.ExecuteRun(ctx, p.ID, q.started()[done]); err != nil {
			t.Fatalf("run %d: %v", done, err)
		}
	}
	const quota = 120
	if got := len(q.started()); got != quota || buckets.takes != quota {
		t.Fatalf("the loop started %d runs at one instant with %d takes; want the FREE quota, %d, one take each", got, buckets.takes, quota)
	}
	_, err := fe.Svc.StartRun(ctx, loop, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	var rl *automation.RateLimited
	if !errors.As(err, &rl) || rl.Err.Code != "QUOTA_EXCEEDED" || rl.RetryAfter != time.Second || !automation.IsRunQuotaExceeded(err) {
		t.Fatalf("a delivery over the quota = %v; want QUOTA_EXCEEDED, retry after a second", err)
	}
	if info, err := fe.Svc.ProjectInfo(ctx, p); err != nil || info.Usage.RunsPerMinute != quota {
		t.Errorf("project info usage = %+v, %v; want runsPerMinute %d", info.Usage, err, quota)
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	started := 0
	for range 100 {
		if _, err := fe.Svc.StartRun(ctx, loop, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)}); err == nil {
			started++
		} else if !automation.IsRunQuotaExceeded(err) {
			t.Fatal(err)
		}
	}
	if started != quota/2 {
		t.Errorf("half a minute later %d runs started, want %d", started, quota/2)
	}
	ent, _ := fe.Project(t, "ent", automation.PlanEnterprise)
	takes := buckets.takes
	fe.StartRef(t, fe.ActiveFlow(t, ent, "one", automation.Step{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)}))
	if buckets.takes != takes {
		t.Errorf("an ENTERPRISE run start took %d tokens", buckets.takes-takes)
	}
}
