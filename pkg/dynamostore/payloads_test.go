package dynamostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/dynamostore"
)

// memPayloads is an in-memory dynamostore.Payloads; pkg/sqsqueue's tests
// use the real S3 one on moto.
type memPayloads struct {
	mu      sync.Mutex
	objects map[string][]byte
	failPut bool
}

func newMemPayloads() *memPayloads { return &memPayloads{objects: map[string][]byte{}} }

func (m *memPayloads) Put(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPut {
		return errors.New("injected put failure")
	}
	m.objects[key] = bytes.Clone(data)
	return nil
}

func (m *memPayloads) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("no object %s", key)
	}
	return b, nil
}

func (m *memPayloads) DeletePrefix(_ context.Context, prefix string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			delete(m.objects, k)
		}
	}
	return nil
}

// keys returns the object keys under a run's prefix.
func (m *memPayloads) keys(runID string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ks []string
	for k := range m.objects {
		if strings.HasPrefix(k, "runs/"+runID+"/") {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// TestRunContractWithPayloads runs the run store contract with a threshold
// so low that every trigger body and step output leaves the item: reads
// must not tell the difference.
func TestRunContractWithPayloads(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server, which serves requests on threads
	storetest.RunRuns(t, func(t *testing.T) storetest.RunEnv {
		_, client, tables := newStore(t)
		s := dynamostore.New(&serialized{API: client}, tables,
			dynamostore.WithPayloads(newMemPayloads()), dynamostore.WithPayloadThreshold(16))
		return storetest.RunEnv{Store: s, Runs: s, Create: s.CreateRun}
	})
}

func payloadStore(t *testing.T) (*dynamostore.Store, *memPayloads, *dynamodb.Client, dynamostore.Tables) {
	t.Helper()
	_, client, tables := newStore(t)
	p := newMemPayloads()
	return dynamostore.New(client, tables, dynamostore.WithPayloads(p), dynamostore.WithPayloadThreshold(1000)), p, client, tables
}

func bigRun(f automation.Flow, id string, bodySize int) automation.Run {
	body := `{"pad":"` + strings.Repeat("x", bodySize) + `"}`
	return automation.Run{
		ID: id, Project: f.Project, FlowID: f.ID, Status: automation.RunRunning, Created: base,
		Steps: []automation.StepResult{},
		Trigger: automation.TriggerData{
			Method: "POST", Path: "/hook", Headers: map[string]string{"content-type": "application/json"},
			Query: map[string]string{}, Body: json.RawMessage(body), RawBody: body + "  ",
		},
	}
}

// TestPayloads walks a run with a large body and large outputs through the
// store and checks what the item and the payload store hold at each step.
func TestPayloads(t *testing.T) {
	s, p, client, tables := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_big", 5000)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if ks := p.keys(r.ID); len(ks) != 1 || !strings.HasPrefix(ks[0], "runs/run_big/trigger-") {
		t.Fatalf("payload keys after create = %v, want one trigger object", ks)
	}
	item, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := item.Item["triggerPayload"]; !ok {
		t.Fatalf("run item has no triggerPayload reference: %v", item.Item)
	}

	// A duplicate ID with another body changes neither the item nor the payload.
	dup := bigRun(f, r.ID, 6000)
	wantCode(t, s.CreateRun(ctx, dup), automation.ErrConflict, "RUN_EXISTS")
	got, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil || !bytes.Equal(got.Trigger.Body, r.Trigger.Body) || got.Trigger.RawBody != r.Trigger.RawBody {
		t.Fatalf("Run after a duplicate create: body %d bytes, raw %d, %v; want %d, %d",
			len(got.Trigger.Body), len(got.Trigger.RawBody), err, len(r.Trigger.Body), len(r.Trigger.RawBody))
	}

	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil || !bytes.Equal(c.Trigger.Body, r.Trigger.Body) {
		t.Fatalf("ClaimRun: body %d bytes, %v", len(c.Trigger.Body), err)
	}

	// A released attempt with a large output, then a finish with small ones:
	// the item goes back to holding its steps.
	large := json.RawMessage(`"` + strings.Repeat("y", 3000) + `"`)
	c.Steps = []automation.StepResult{
		{Name: "a", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: large},
		{Name: "b", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "503"},
	}
	if err := s.ReleaseRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err = s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil || len(got.Steps) != 2 || !bytes.Equal(got.Steps[0].Output, large) || got.Steps[1].Output != nil {
		t.Fatalf("Run after release = %+v, %v", got.Steps, err)
	}
	page, err := s.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	li := page.Items[0]
	// Lists hold summaries: no body, no outputs, step errors kept.
	if len(li.Trigger.Body) != 0 || li.Trigger.RawBody != "" || len(li.Steps[0].Output) != 0 || li.Steps[1].Error != "503" {
		t.Fatalf("list item: body %s, raw %q, step outputs %s; want a summary", li.Trigger.Body, li.Trigger.RawBody, li.Steps[0].Output)
	}

	c, err = s.ClaimRun(ctx, f.Project, r.ID, base.Add(time.Second), time.Minute)
	if err != nil || !bytes.Equal(c.Steps[0].Output, large) {
		t.Fatalf("second claim: %+v, %v", c.Steps, err)
	}
	c.Status = automation.RunSucceeded
	c.Steps = []automation.StepResult{{Name: "a", Type: automation.StepSet, Status: automation.StepSucceeded, Output: json.RawMessage(`{"ok": 1}`)}}
	c.Response = &automation.RunResponse{StatusCode: 200, Body: json.RawMessage(`{"ok": 1}`)}
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err = s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil || string(got.Steps[0].Output) != `{"ok": 1}` || string(got.Response.Body) != `{"ok": 1}` ||
		!bytes.Equal(got.Trigger.Body, r.Trigger.Body) {
		t.Fatalf("finished run: steps %+v, response %+v, %v", got.Steps, got.Response, err)
	}
	item, err = client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := item.Item["stepsPayload"]; ok {
		t.Fatal("small steps still referenced as a payload")
	}

	// A second finish loses its condition and leaves the payload the run
	// references as it was.
	again := c
	again.Steps = []automation.StepResult{{Name: "a", Status: automation.StepSucceeded, Output: large}}
	wantCode(t, s.FinishRun(ctx, again), automation.ErrConflict, "RUN_FINISHED")
	if got, err := s.Run(ctx, f.Project, f.ID, r.ID); err != nil || string(got.Steps[0].Output) != `{"ok": 1}` {
		t.Fatalf("run after a refused finish: %+v, %v", got.Steps, err)
	}

	if err := s.DeleteFlow(ctx, f.Project, f.ID); err != nil {
		t.Fatal(err)
	}
	if ks := p.keys(r.ID); len(ks) != 0 {
		t.Fatalf("payloads left after DeleteFlow: %v", ks)
	}
}

// TestSmallRunsStayInTheItem checks that runs under the threshold never
// touch the payload store.
func TestSmallRunsStayInTheItem(t *testing.T) {
	s, p, _, _ := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_small", 10)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Status = automation.RunSucceeded
	c.Steps = []automation.StepResult{{Name: "a", Status: automation.StepSucceeded, Output: json.RawMessage(`1`)}}
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	if len(p.objects) != 0 {
		t.Fatalf("payload store holds %d objects for a small run", len(p.objects))
	}
}

func TestPayloadFailures(t *testing.T) {
	s, p, client, tables := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	p.failPut = true
	r := bigRun(f, "run_big", 5000)
	if err := s.CreateRun(ctx, r); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("CreateRun with a failing payload store = %v", err)
	}
	if _, err := s.Run(ctx, f.Project, f.ID, r.ID); !automation.IsNotFound(err) {
		t.Fatalf("a run whose payload failed was stored anyway: %v", err)
	}
	p.failPut = false
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	// A payload the item references but the store lost is an error, not a
	// missing run.
	for _, k := range p.keys(r.ID) {
		delete(p.objects, k)
	}
	_, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err == nil || automation.IsNotFound(err) {
		t.Fatalf("Run with its payload gone = %v, want an internal error", err)
	}
	// A store without payloads refuses to return a run it cannot complete.
	plain := dynamostore.New(client, tables)
	if _, err := plain.Run(ctx, f.Project, f.ID, r.ID); err == nil || !strings.Contains(err.Error(), "WithPayloads") {
		t.Fatalf("Run on a store without payloads = %v, want an error naming WithPayloads", err)
	}
}

func TestDeleteUnclaimedRun(t *testing.T) {
	s, p, _, _ := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_big", 5000)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteUnclaimedRun(ctx, "prj_other", r.ID), automation.ErrNotFound, "RUN_NOT_FOUND")
	if err := s.DeleteUnclaimedRun(ctx, f.Project, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, f.Project, f.ID, r.ID); !automation.IsNotFound(err) {
		t.Fatalf("Run after DeleteUnclaimedRun: %v", err)
	}
	if ks := p.keys(r.ID); len(ks) != 0 {
		t.Fatalf("payloads left: %v", ks)
	}
	wantCode(t, s.DeleteUnclaimedRun(ctx, f.Project, r.ID), automation.ErrNotFound, "RUN_NOT_FOUND")

	// The same ID can be created again: a sender's retry of a derived ID.
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteUnclaimedRun(ctx, f.Project, r.ID), automation.ErrConflict, "RUN_CLAIMED")
	if err := s.ReleaseRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteUnclaimedRun(ctx, f.Project, r.ID), automation.ErrConflict, "RUN_CLAIMED")
	// The finish comes from the attempt that holds the run (fencing).
	c, err = s.ClaimRun(ctx, f.Project, r.ID, base.Add(time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Status = automation.RunFailed
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteUnclaimedRun(ctx, f.Project, r.ID), automation.ErrConflict, "RUN_FINISHED")
}

func TestPurgeDeletesPayloads(t *testing.T) {
	s, p, _, _ := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	old, fresh := bigRun(f, "run_old", 5000), bigRun(f, "run_new", 5000)
	old.Created, fresh.Created = base.Add(-48*time.Hour), base
	for _, r := range []automation.Run{old, fresh} {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteRunsBefore(ctx, base.Add(-24*time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("DeleteRunsBefore = %d, %v", n, err)
	}
	if len(p.keys(old.ID)) != 0 || len(p.keys(fresh.ID)) != 1 {
		t.Fatalf("payloads after purge: old %v, fresh %v", p.keys(old.ID), p.keys(fresh.ID))
	}
}

func runItemKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
}

// TestOldStepsPayloadsLoad reads a run whose steps object is in the format
// written before whole step lists went to payloads: the top-level outputs
// alone, beside steps the item holds with markers.
func TestOldStepsPayloadsLoad(t *testing.T) {
	s, p, client, tables := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_old", 10)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	large := json.RawMessage(`{ "v": "` + strings.Repeat("y", 3000) + `" }`)
	c.Steps = []automation.StepResult{
		{Name: "a", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: large},
		{Name: "b", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "503"},
	}
	if err := s.ReleaseRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	item, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := item.Item["stepsPayload"].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("no stepsPayload in %v", item.Item)
	}
	old, err := json.Marshal(map[string]any{"outputs": [][]byte{large, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Put(ctx, ref.Value, old); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil || len(got.Steps) != 2 || !bytes.Equal(got.Steps[0].Output, large) || got.Steps[1].Output != nil || got.Steps[1].Error != "503" {
		t.Fatalf("Run from an old steps object = %+v, %v", got.Steps, err)
	}
	if err := p.Put(ctx, ref.Value, []byte(`{"outputs":[null]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, f.Project, f.ID, r.ID); err == nil || !strings.Contains(err.Error(), "1 step outputs") {
		t.Fatalf("Run from an old object of the wrong length: %v, want an error", err)
	}
}

// TestLongLogsLeaveTheItem: when the top-level steps alone (CODE steps'
// logs) would pass the threshold, their logs go to the payload too; GET
// gives them back, lists show the steps without them.
func TestLongLogsLeaveTheItem(t *testing.T) {
	s, _, client, tables := payloadStore(t)
	ctx := t.Context()
	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_logs", 10)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("l", 400)
	for i := range 4 {
		c.Steps = append(c.Steps, automation.StepResult{Name: fmt.Sprintf("code%d", i), Type: automation.StepCode,
			Status: automation.StepSucceeded, Logs: []string{line, line}, Output: json.RawMessage(`1`)})
	}
	longErr := strings.Repeat("é", 3000) // 6000 bytes, cut on a character boundary
	c.Steps[3].Status, c.Steps[3].Error = automation.StepFailed, longErr
	if err := s.RecordSteps(ctx, c); err != nil {
		t.Fatal(err)
	}
	item, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(item.Item["steps"]); strings.Contains(string(b), line) || strings.Contains(string(b), longErr) {
		t.Fatalf("item steps keep the logs or the whole error: %d bytes", len(b))
	}
	got, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range got.Steps {
		if !slices.Equal(st.Logs, c.Steps[i].Logs) || string(st.Output) != `1` || st.Error != c.Steps[i].Error {
			t.Fatalf("Run step %d = %+v, want its logs and output back", i, st)
		}
	}
	page, err := s.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	if err != nil || len(page.Items) != 1 || len(page.Items[0].Steps) != 4 || page.Items[0].Steps[3].Name != "code3" {
		t.Fatalf("ListRuns = %+v, %v", page.Items, err)
	}
	if e := page.Items[0].Steps[3].Error; !utf8.ValidString(e) || !strings.HasPrefix(e, strings.Repeat("é", 512)) || len(e) > 1100 {
		t.Fatalf("listed error = %d bytes, want its first KiB", len(e))
	}
}
