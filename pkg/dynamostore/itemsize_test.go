package dynamostore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/s3payloads"
)

// journal is a FOR_EACH items journal of about size bytes of JSON.
func journal(tag string, size int) *automation.ItemsJournal {
	n := size / 1024
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%s-%04d-%s", tag, i, strings.Repeat("j", 1024-14-len(tag)))
	}
	b, _ := json.Marshal(items)
	sum := sha256.Sum256(b)
	return &automation.ItemsJournal{Count: n, SHA256: hex.EncodeToString(sum[:]), Items: b}
}

// loopResult is a FOR_EACH with a 60 KiB journal and iterations whose
// nested steps (a SWITCH among them) hold large outputs: outputs with
// whitespace and HTML characters, which must come back byte for byte.
func loopResult(name string, iterations int) automation.StepResult {
	at := base.Add(time.Second)
	out := json.RawMessage("{ \"html\": \"<b>&amp;</b>\",\n  \"pad\": \"" + strings.Repeat("o", 8<<10) + "\" }")
	sr := automation.StepResult{Name: name, Type: automation.StepForEach, Status: automation.StepFailed,
		StartedAt: &at, Attempts: 1, ItemsJournal: journal(name, 60<<10)}
	for i := range iterations {
		sr.Iterations = append(sr.Iterations, automation.Iteration{Index: i, Status: automation.StepSucceeded,
			Steps: []automation.StepResult{
				{Name: "fetch", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: out, StartedAt: &at, FinishedAt: &at, DurationMs: 3, Attempts: 1},
				{Name: "route", Type: automation.StepSwitch, Status: automation.StepSucceeded, Attempts: 1,
					Steps: []automation.StepResult{{Name: "keep", Type: automation.StepCode, Status: automation.StepSucceeded, Output: out, Logs: []string{"kept"}, Attempts: 1}}},
			}})
	}
	return sr
}

// TestLargeStepsLeaveTheItem writes a run whose FOR_EACH loops hold 60 KiB
// items journals and large nested results (far over 400 KB in all) with
// the real S3 payload store and the default threshold: the item stays
// small, and GET, lists and a claim after a crash give the run back.
func TestLargeStepsLeaveTheItem(t *testing.T) {
	t.Parallel() // tables and bucket of its own; moto's slowest test, beside the contract suite
	ctx := t.Context()
	cfg := awstest.Start(t)
	client := dynamodb.NewFromConfig(cfg)
	tables := dynamostore.TableNames(awstest.UniqueName(t, "fs"))
	if err := dynamostore.CreateTables(ctx, client, tables); err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := awstest.UniqueName(t, "payloads")
	if err := s3payloads.CreateBucket(ctx, s3c, bucket, 31); err != nil {
		t.Fatal(err)
	}
	s := dynamostore.New(client, tables, dynamostore.WithPayloads(s3payloads.New(s3c, bucket)))

	f := newFlow("prj_a", "flw_1", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := bigRun(f, "run_loops", 100)
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Steps = []automation.StepResult{
		{Name: "first", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: json.RawMessage(`{"ok":true}`), Attempts: 1},
		loopResult("a", 6), loopResult("b", 6), loopResult("c", 6), loopResult("d", 6),
	}
	c.OnErrorSteps = []automation.StepResult{loopResult("cleanup", 3)}
	c.OnErrorOf = automation.RunFailed
	if err := s.RecordSteps(ctx, c); err != nil {
		t.Fatalf("RecordSteps of a run with large loops: %v", err)
	}

	item, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	// JSON of the attribute values over-counts (base64, type names): an upper bound.
	if b, err := json.Marshal(item.Item); err != nil || len(b) > 16<<10 {
		t.Fatalf("run item is %d bytes of JSON (%v), want it small with its steps in the payload store", len(b), err)
	}
	if _, ok := item.Item["stepsPayload"]; !ok {
		t.Fatal("run item has no stepsPayload reference")
	}

	want := c
	want.Interrupted, want.LeaseToken = 0, ""
	got, err := s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want.Steps, got.Steps); d != "" {
		t.Fatalf("Run: steps differ (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.OnErrorSteps, got.OnErrorSteps); d != "" {
		t.Fatalf("Run: onError steps differ (-want +got):\n%s", d)
	}

	page, err := s.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListRuns = %d runs, %v", len(page.Items), err)
	}
	listed := page.Items[0]
	if len(listed.Steps) != len(want.Steps) || listed.OnErrorSteps != nil {
		t.Fatalf("listed run: %d steps, onError %v", len(listed.Steps), listed.OnErrorSteps)
	}
	for i, st := range listed.Steps {
		w := want.Summary().Steps[i]
		if st.Name != w.Name || st.Status != w.Status || st.Type != w.Type || st.Iterations != nil || st.ItemsJournal != nil || st.Output != nil {
			t.Fatalf("listed step %d = %+v, want the summary of %+v", i, st, w)
		}
	}

	// The attempt dies; the next claim, after its lease, resumes from the
	// same journal.
	resumed, err := s.ClaimRun(ctx, f.Project, r.ID, base.Add(2*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Interrupted != 1 || resumed.OnErrorOf != automation.RunFailed {
		t.Fatalf("resumed claim: interrupted %d, onErrorOf %q", resumed.Interrupted, resumed.OnErrorOf)
	}
	if d := cmp.Diff(want.Steps, resumed.Steps); d != "" {
		t.Fatalf("ClaimRun: steps differ (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.OnErrorSteps, resumed.OnErrorSteps); d != "" {
		t.Fatalf("ClaimRun: onError steps differ (-want +got):\n%s", d)
	}
	for i, st := range resumed.Steps[1:] {
		if !json.Valid(st.ItemsJournal.Items) || string(st.ItemsJournal.Items) != string(want.Steps[i+1].ItemsJournal.Items) {
			t.Fatalf("journal of %s changed", st.Name)
		}
	}

	// It finishes with small steps: the item holds them again, and nothing
	// of the large attempt stays behind.
	resumed.Status = automation.RunSucceeded
	resumed.Steps = []automation.StepResult{{Name: "first", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: json.RawMessage(`{"ok":true}`), Attempts: 1}}
	resumed.OnErrorSteps, resumed.OnErrorOf = nil, ""
	if err := s.FinishRun(ctx, resumed); err != nil {
		t.Fatal(err)
	}
	item, err = client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, Key: runItemKey(r.ID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stepsPayload", "onErrorSteps", "onErrorOf"} {
		if _, ok := item.Item[k]; ok {
			t.Fatalf("finished small run keeps %s", k)
		}
	}
	got, err = s.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(resumed.Steps, got.Steps); d != "" || got.OnErrorSteps != nil {
		t.Fatalf("finished run: steps differ (-want +got):\n%s\nonError %v", d, got.OnErrorSteps)
	}
}
