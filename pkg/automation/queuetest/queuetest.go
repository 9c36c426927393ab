// Package queuetest is the contract every automation.RunQueue passes: the
// embedded queue (sqlitestore) and the SQS queue (sqsqueue with dynamostore)
// run the same test functions. It checks what a receiver relies on when it
// answers 200: the run is readable and exactly one message for it is on the
// queue, whatever the size of its trigger data.
package queuetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// Env is a run queue with the stores it writes to, as an adapter wires them.
type Env struct {
	Store automation.Store
	Runs  automation.RunStore
	Queue automation.RunQueue
	// Next returns the next message the queue delivers, if one is there
	// now, and a function that deletes it (SQS: ReceiveMessage and
	// DeleteMessage; embedded: ClaimDue and Ack). A message not acked may be
	// delivered again later, but not within the test.
	Next func(ctx context.Context) (m automation.QueueMessage, ack func(), ok bool)
}

// Run runs the queue contract against the environment open makes. open must
// return an empty queue and empty stores each call and arrange their cleanup.
func Run(t *testing.T, open func(t *testing.T) Env) {
	t.Run("EnqueueMakesOneMessage", func(t *testing.T) { testEnqueue(t, open(t)) })
	t.Run("DuplicateID", func(t *testing.T) { testDuplicate(t, open(t)) })
	t.Run("LargeBody", func(t *testing.T) { testLargeBody(t, open(t)) })
	t.Run("MessagesCarryProject", func(t *testing.T) { testProjects(t, open(t)) })
}

// LargeBodyBytes is the trigger body size the contract round-trips: the
// Lambda proxy's 6 MB limit is the most a receiver accepts on AWS, and this
// is well over what a DynamoDB item (400 KB) or an SQS message (1 MiB)
// holds.
const LargeBodyBytes = 2 << 20

func fixture(t *testing.T, env Env, name string) automation.Flow {
	t.Helper()
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Millisecond)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: name, Plan: automation.PlanTeam, Created: created}
	must(t, "create project", env.Store.CreateProject(ctx, p))
	f := automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: p.ID, Name: name, Status: automation.FlowActive,
		Engine: automation.FlowBuilder, TriggerType: automation.TriggerWebhook, Version: 1,
		Created: created, Updated: created, Steps: []automation.Step{},
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}},
	}
	must(t, "create flow", env.Store.CreateFlow(ctx, f))
	return f
}

func newRun(f automation.Flow, body string) automation.Run {
	return automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID,
		Status: automation.RunRunning, Created: time.Now().UTC().Truncate(time.Millisecond), Steps: []automation.StepResult{},
		Trigger: automation.TriggerData{
			Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
			Headers: map[string]string{"content-type": "application/json"}, Query: map[string]string{},
			Body: json.RawMessage(body),
		},
	}
}

// drain returns every message delivered now, acked.
func drain(t *testing.T, env Env) []automation.QueueMessage {
	t.Helper()
	var ms []automation.QueueMessage
	for range 100 {
		m, ack, ok := env.Next(context.Background())
		if !ok {
			return ms
		}
		ack()
		ms = append(ms, m)
	}
	t.Fatal("the queue delivered 100 messages; the test made fewer")
	return nil
}

func testEnqueue(t *testing.T, env Env) {
	ctx := context.Background()
	f := fixture(t, env, "enqueue")
	r := newRun(f, `{"event":"push"}`)
	must(t, "enqueue", env.Queue.Enqueue(ctx, r))
	got, err := env.Runs.Run(ctx, f.Project, f.ID, r.ID)
	must(t, "read the enqueued run", err)
	if got.Status != automation.RunRunning || string(got.Trigger.Body) != `{"event":"push"}` || got.Attempts != 0 {
		t.Fatalf("enqueued run = status %s, body %s, attempts %d; want RUNNING, the body, 0", got.Status, got.Trigger.Body, got.Attempts)
	}
	ms := drain(t, env)
	want := automation.QueueMessage{Kind: automation.MessageRun, Project: f.Project, RunID: r.ID}
	if len(ms) != 1 || ms[0] != want {
		t.Fatalf("messages = %+v, want exactly %+v", ms, want)
	}
}

func testDuplicate(t *testing.T, env Env) {
	ctx := context.Background()
	f := fixture(t, env, "duplicate")
	r := newRun(f, `{"n":1}`)
	must(t, "enqueue", env.Queue.Enqueue(ctx, r))
	dup := r
	dup.Trigger.Body = json.RawMessage(`{"n":2}`)
	err := env.Queue.Enqueue(ctx, dup)
	if !errors.Is(err, automation.ErrConflict) || !automation.IsRunExists(err) {
		t.Fatalf("enqueue of an existing run ID = %v, want ErrConflict RUN_EXISTS", err)
	}
	got, err := env.Runs.Run(ctx, f.Project, f.ID, r.ID)
	must(t, "read the run", err)
	if string(got.Trigger.Body) != `{"n":1}` {
		t.Fatalf("a duplicate enqueue changed the run's body to %s", got.Trigger.Body)
	}
	if ms := drain(t, env); len(ms) != 1 || ms[0].RunID != r.ID {
		t.Fatalf("messages = %+v, want one for %s", ms, r.ID)
	}
}

func testLargeBody(t *testing.T, env Env) {
	ctx := context.Background()
	f := fixture(t, env, "large")
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < LargeBodyBytes; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"i": 1234567, "s": "the quick brown fox jumps over the lazy dog"}`)
	}
	b.WriteString("]}")
	r := newRun(f, b.String())
	r.Trigger.RawBody = b.String() + "\n"
	must(t, "enqueue a large run", env.Queue.Enqueue(ctx, r))
	got, err := env.Runs.Run(ctx, f.Project, f.ID, r.ID)
	must(t, "read the large run", err)
	if !sameJSON(got.Trigger.Body, r.Trigger.Body) || got.Trigger.RawBody != r.Trigger.RawBody {
		t.Fatalf("large run read back: body %d bytes, raw %d; want %d and %d unchanged",
			len(got.Trigger.Body), len(got.Trigger.RawBody), len(r.Trigger.Body), len(r.Trigger.RawBody))
	}
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, time.Now(), time.Minute)
	must(t, "claim the large run", err)
	if !sameJSON(c.Trigger.Body, r.Trigger.Body) {
		t.Fatalf("claimed large run has a %d-byte body, want %d", len(c.Trigger.Body), len(r.Trigger.Body))
	}
	ms := drain(t, env)
	if len(ms) != 1 || ms[0].RunID != r.ID {
		t.Fatalf("messages = %+v, want one for %s", ms, r.ID)
	}
}

func testProjects(t *testing.T, env Env) {
	ctx := context.Background()
	fa, fb := fixture(t, env, "alpha"), fixture(t, env, "beta")
	want := map[string]string{}
	for range 3 {
		for _, f := range []automation.Flow{fa, fb} {
			r := newRun(f, `{}`)
			must(t, "enqueue", env.Queue.Enqueue(ctx, r))
			want[r.ID] = f.Project
		}
	}
	got := map[string]string{}
	var kinds []string
	for _, m := range drain(t, env) {
		if _, dup := got[m.RunID]; dup {
			t.Fatalf("run %s delivered twice", m.RunID)
		}
		got[m.RunID] = m.Project
		kinds = append(kinds, m.Kind)
	}
	if len(got) != len(want) {
		t.Fatalf("got messages for %d runs, want %d", len(got), len(want))
	}
	for id, p := range want {
		if got[id] != p {
			t.Errorf("message for run %s names project %q, want %q", id, got[id], p)
		}
	}
	if slices.ContainsFunc(kinds, func(k string) bool { return k != automation.MessageRun }) {
		t.Errorf("message kinds %v, want all %q", kinds, automation.MessageRun)
	}
}

// sameJSON compares bodies as JSON: Body is the parsed JSON, which a store
// may keep compacted (the embedded one does); RawBody keeps the wire bytes.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
