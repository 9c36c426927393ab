package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// newSample is a captured event with a body of n bytes or so (0: small).
func newSample(t *testing.T, at time.Time, n int) automation.Sample {
	t.Helper()
	body := json.RawMessage(`{"event":"push","data":{"ref":"main","commits":[{"id":1}]}}`)
	if n > 0 {
		body = json.RawMessage(`{"event":"big","blob":"` + strings.Repeat("x", n) + `"}`)
	}
	schema, err := automation.InferSchema(body)
	must(t, "InferSchema", err)
	return automation.Sample{
		CapturedAt: at,
		Trigger: automation.TriggerData{
			Method: "POST", Path: "/api/v1/webhooks/x",
			Headers: map[string]string{"content-type": "application/json", "x-github-event": "push"},
			Query:   map[string]string{"a": "1"},
			Body:    body,
		},
		Schema: schema,
	}
}

// sampleFixture stores a webhook flow and returns it.
func sampleFixture(t *testing.T, s automation.Store) automation.Flow {
	t.Helper()
	p := newProject("samples", now())
	must(t, "create project", s.CreateProject(context.Background(), p))
	f := flowBuilderWebhook(p.ID, "hook", now())
	must(t, "create flow", s.CreateFlow(context.Background(), f))
	return f
}

func wantArmedUntil(t *testing.T, s automation.Store, f automation.Flow, want time.Time) {
	t.Helper()
	got, err := s.ArmedUntil(context.Background(), f.Project, f.ID)
	must(t, "ArmedUntil", err)
	if !got.Equal(want) {
		t.Errorf("ArmedUntil = %v, want %v", got, want)
	}
}

func testSampleArming(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	base := now()
	other := automation.NewID(automation.PrefixProject)

	_, err := s.Capture(ctx, f.Project, f.ID)
	wantKind(t, "Capture before any arming", err, automation.ErrNotFound, "SAMPLE_NOT_FOUND")
	wantArmedUntil(t, s, f, time.Time{})
	taken, err := s.TakeCapture(ctx, f.Project, f.ID, base)
	must(t, "TakeCapture before any arming", err)
	if taken {
		t.Errorf("TakeCapture before any arming = true")
	}
	wantKind(t, "ArmCapture of another project", s.ArmCapture(ctx, other, f.ID, base.Add(time.Minute)),
		automation.ErrNotFound, "FLOW_NOT_FOUND")
	wantKind(t, "ArmCapture of an unknown flow", s.ArmCapture(ctx, f.Project, automation.NewID(automation.PrefixFlow), base.Add(time.Minute)),
		automation.ErrNotFound, "FLOW_NOT_FOUND")
	wantArmedUntil(t, s, f, time.Time{})

	until := base.Add(2 * time.Minute)
	must(t, "ArmCapture", s.ArmCapture(ctx, f.Project, f.ID, until))
	wantArmedUntil(t, s, f, until)
	c, err := s.Capture(ctx, f.Project, f.ID)
	must(t, "Capture while armed", err)
	if !c.ArmedUntil.Equal(until) || c.Sample != nil {
		t.Errorf("Capture while armed = %+v, want armed until %v and no sample", c, until)
	}
	_, err = s.Capture(ctx, other, f.ID)
	wantKind(t, "Capture of another project", err, automation.ErrNotFound, "SAMPLE_NOT_FOUND")
	if got, err := s.ArmedUntil(ctx, other, f.ID); err != nil || !got.IsZero() {
		t.Errorf("ArmedUntil of another project = %v, %v; want zero", got, err)
	}
	if taken, err := s.TakeCapture(ctx, other, f.ID, base); err != nil || taken {
		t.Errorf("TakeCapture of another project = %v, %v; want false", taken, err)
	}

	// Arming again moves the expiry (either way).
	until = base.Add(3 * time.Minute)
	must(t, "ArmCapture again", s.ArmCapture(ctx, f.Project, f.ID, until))
	wantArmedUntil(t, s, f, until)

	// Once per arming.
	taken, err = s.TakeCapture(ctx, f.Project, f.ID, base.Add(time.Minute))
	must(t, "TakeCapture", err)
	if !taken {
		t.Fatalf("TakeCapture while armed = false")
	}
	wantArmedUntil(t, s, f, time.Time{})
	taken, err = s.TakeCapture(ctx, f.Project, f.ID, base.Add(time.Minute))
	must(t, "TakeCapture again", err)
	if taken {
		t.Errorf("TakeCapture after the arming was taken = true")
	}

	// An expired arming is not taken: the expiry itself is already too late.
	until = base.Add(4 * time.Minute)
	must(t, "ArmCapture a third time", s.ArmCapture(ctx, f.Project, f.ID, until))
	if taken, err := s.TakeCapture(ctx, f.Project, f.ID, until); err != nil || taken {
		t.Errorf("TakeCapture at the expiry = %v, %v; want false", taken, err)
	}
	if taken, err := s.TakeCapture(ctx, f.Project, f.ID, until.Add(-time.Millisecond)); err != nil || !taken {
		t.Errorf("TakeCapture a millisecond before the expiry = %v, %v; want true", taken, err)
	}

	// None of it touches the flow's definition.
	equalFlow(t, "flow after arming and taking", getFlow(t, s, f.Project, f.ID), f)
}

func testSamplePut(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	base := now()

	wantKind(t, "PutSample before any arming", s.PutSample(ctx, f.Project, f.ID, newSample(t, base, 0)),
		automation.ErrNotFound, "")
	until := base.Add(2 * time.Minute)
	must(t, "ArmCapture", s.ArmCapture(ctx, f.Project, f.ID, until))
	first := newSample(t, base, 0)
	must(t, "PutSample", s.PutSample(ctx, f.Project, f.ID, first))
	c, err := s.Capture(ctx, f.Project, f.ID)
	must(t, "Capture", err)
	if !c.ArmedUntil.Equal(until) {
		t.Errorf("ArmedUntil after PutSample = %v, want %v (kept)", c.ArmedUntil, until)
	}
	equalSample(t, "Capture.Sample", c.Sample, first, false)

	// The latest replaces it; re-arming keeps it until then.
	must(t, "ArmCapture again", s.ArmCapture(ctx, f.Project, f.ID, until.Add(time.Minute)))
	c, err = s.Capture(ctx, f.Project, f.ID)
	must(t, "Capture after re-arming", err)
	equalSample(t, "sample after re-arming", c.Sample, first, false)
	second := newSample(t, base.Add(time.Second), 0)
	second.Trigger.Body = json.RawMessage(`[1, 2.5, "x"]`)
	second.Schema, err = automation.InferSchema(second.Trigger.Body)
	must(t, "InferSchema", err)
	must(t, "PutSample again", s.PutSample(ctx, f.Project, f.ID, second))
	c, err = s.Capture(ctx, f.Project, f.ID)
	must(t, "Capture after the second sample", err)
	equalSample(t, "second sample", c.Sample, second, false)

	wantKind(t, "PutSample of another project", s.PutSample(ctx, automation.NewID(automation.PrefixProject), f.ID, first),
		automation.ErrNotFound, "")
	equalFlow(t, "flow after samples", getFlow(t, s, f.Project, f.ID), f)

	// A body as large as a webhook may send (1 MiB here) is kept whole, or,
	// where the adapter says so in its docs, as the truncation marker; the
	// schema, inferred from the whole body, is kept either way.
	big := newSample(t, base.Add(2*time.Second), 1<<20)
	must(t, "PutSample of a large body", s.PutSample(ctx, f.Project, f.ID, big))
	c, err = s.Capture(ctx, f.Project, f.ID)
	must(t, "Capture of a large body", err)
	equalSample(t, "large sample", c.Sample, big, true)
}

// equalSample compares samples; with mayTruncate, the body may be the
// adapters' marker {"truncated":true,"bytes":N}.
func equalSample(t *testing.T, what string, got *automation.Sample, want automation.Sample, mayTruncate bool) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s = nil, want %+v", what, want)
	}
	if !got.CapturedAt.Equal(want.CapturedAt) {
		t.Errorf("%s.CapturedAt = %v, want %v", what, got.CapturedAt, want.CapturedAt)
	}
	if jsonOf(t, got.Schema) != jsonOf(t, want.Schema) {
		t.Errorf("%s.Schema = %s, want %s", what, jsonOf(t, got.Schema), jsonOf(t, want.Schema))
	}
	gt, wt := got.Trigger, want.Trigger
	if jsonOf(t, gt.Headers) != jsonOf(t, wt.Headers) || jsonOf(t, gt.Query) != jsonOf(t, wt.Query) ||
		gt.Method != wt.Method || gt.Path != wt.Path {
		t.Errorf("%s.Trigger = %s, want %s", what, jsonOf(t, gt), jsonOf(t, wt))
	}
	if compact(t, gt.Body) == compact(t, wt.Body) {
		return
	}
	var marker struct {
		Truncated bool `json:"truncated"`
		Bytes     int  `json:"bytes"`
	}
	if mayTruncate && json.Unmarshal(gt.Body, &marker) == nil && marker.Truncated && marker.Bytes == len(wt.Body) {
		return
	}
	t.Errorf("%s.Trigger.Body = %.200s, want %.200s", what, gt.Body, wt.Body)
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %.100s: %v", raw, err)
	}
	return b.String()
}

func testSampleTakeRace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	base := now()
	must(t, "ArmCapture", s.ArmCapture(ctx, f.Project, f.ID, base.Add(time.Minute)))
	const n = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		fails []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taken, err := s.TakeCapture(ctx, f.Project, f.ID, base)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails = append(fails, err)
			}
			if taken {
				wins++
			}
		}()
	}
	wg.Wait()
	if len(fails) > 0 || wins != 1 {
		t.Errorf("%d simultaneous TakeCapture: %d took it (errors %v), want exactly 1", n, wins, fails)
	}
}

func testSampleGoesWithFlow(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	base := now()
	must(t, "ArmCapture", s.ArmCapture(ctx, f.Project, f.ID, base.Add(time.Minute)))
	must(t, "PutSample", s.PutSample(ctx, f.Project, f.ID, newSample(t, base, 0)))
	must(t, "DeleteFlow", s.DeleteFlow(ctx, f.Project, f.ID))
	_, err := s.Capture(ctx, f.Project, f.ID)
	wantKind(t, "Capture of a deleted flow", err, automation.ErrNotFound, "SAMPLE_NOT_FOUND")
	wantArmedUntil(t, s, f, time.Time{})
	wantKind(t, "ArmCapture of a deleted flow", s.ArmCapture(ctx, f.Project, f.ID, base.Add(time.Minute)),
		automation.ErrNotFound, "FLOW_NOT_FOUND")
}
