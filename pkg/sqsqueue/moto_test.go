package sqsqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/automation/queuetest"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/s3payloads"
	"flowservice/pkg/sqsqueue"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// env is the AWS run queue as the functions wire it, on moto: tables,
// payload bucket, queue.
type env struct {
	store  *dynamostore.Store
	s3     *s3.Client
	bucket string
	sqs    *sqs.Client
	url    string
	queue  *sqsqueue.Queue
}

func newEnv(t *testing.T, queueAttrs map[string]string) *env {
	t.Helper()
	ctx := t.Context()
	cfg := awstest.Start(t)
	db := dynamodb.NewFromConfig(cfg)
	tables := dynamostore.TableNames(awstest.UniqueName(t, "fs"))
	if err := dynamostore.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := awstest.UniqueName(t, "payloads")
	if err := s3payloads.CreateBucket(ctx, s3c, bucket, 31); err != nil {
		t.Fatal(err)
	}
	payloads := s3payloads.New(s3c, bucket)
	store := dynamostore.New(db, tables, dynamostore.WithPayloads(payloads))
	sq := sqs.NewFromConfig(cfg)
	url := createQueue(t, sq, awstest.UniqueName(t, "runs"), queueAttrs)
	return &env{store: store, s3: s3c, bucket: bucket, sqs: sq, url: url, queue: sqsqueue.New(store, sq, url)}
}

func createQueue(t *testing.T, client *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// receive takes one message from a queue if one is visible now.
func receive(t *testing.T, client *sqs.Client, url string) (sqstypes.Message, bool) {
	t.Helper()
	out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: 1, WaitTimeSeconds: 0,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return sqstypes.Message{}, false
	}
	return out.Messages[0], true
}

func receiveCount(m sqstypes.Message) string {
	return m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]
}

func TestContract(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) queuetest.Env {
		e := newEnv(t, nil)
		return queuetest.Env{Store: e.store, Runs: e.store, Queue: e.queue, Next: func(ctx context.Context) (automation.QueueMessage, func(), bool) {
			m, ok := receive(t, e.sqs, e.url)
			if !ok {
				return automation.QueueMessage{}, nil, false
			}
			var qm automation.QueueMessage
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &qm); err != nil {
				t.Fatalf("message body %q: %v", aws.ToString(m.Body), err)
			}
			ack := func() {
				if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &e.url, ReceiptHandle: m.ReceiptHandle}); err != nil {
					t.Errorf("delete message: %v", err)
				}
			}
			return qm, ack, true
		}}
	})
}

func fixture(t *testing.T, s *dynamostore.Store) automation.Flow {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "p", Plan: automation.PlanTeam, Created: now}
	if err := s.CreateProject(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	f := automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: p.ID, Name: "f", Status: automation.FlowActive,
		Engine: automation.FlowBuilder, TriggerType: automation.TriggerWebhook, Version: 1,
		Created: now, Updated: now, Steps: []automation.Step{},
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}},
	}
	if err := s.CreateFlow(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

func newRun(f automation.Flow, body string) automation.Run {
	return automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID, Status: automation.RunRunning,
		Created: time.Now().UTC().Truncate(time.Millisecond), Steps: []automation.StepResult{},
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(body)},
	}
}

// jsonString returns a JSON string of about n bytes.
func jsonString(n int, fill string) string {
	return `"` + strings.Repeat(fill, n/len(fill)) + `"`
}

// TestLargePayloads is the AWS path of a 2 MB webhook: the run item
// references its body in S3, the runner's claim sees it whole, and a 500 KB
// step output finishes the run through S3 too.
func TestLargePayloads(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	f := fixture(t, e.store)
	r := newRun(f, `{"data":`+jsonString(2<<20, "0123456789")+`}`)
	if err := e.queue.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	m, ok := receive(t, e.sqs, e.url)
	if !ok {
		t.Fatal("no message after Enqueue")
	}
	if n := len(aws.ToString(m.Body)); n > 200 {
		t.Errorf("message is %d bytes; run messages carry IDs only", n)
	}
	c, err := e.store.ClaimRun(ctx, f.Project, r.ID, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Trigger.Body, r.Trigger.Body) {
		t.Fatalf("claimed run has a %d-byte body, want the %d sent", len(c.Trigger.Body), len(r.Trigger.Body))
	}
	out := json.RawMessage(jsonString(500<<10, "abcdefgh"))
	started := time.Now().UTC()
	c.Status = automation.RunSucceeded
	c.Steps = []automation.StepResult{{Name: "fetch", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: out, StartedAt: &started}}
	c.Response = &automation.RunResponse{StatusCode: 200, Body: out}
	if err := e.store.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Run(ctx, f.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunSucceeded || len(got.Steps) != 1 || !bytes.Equal(got.Steps[0].Output, out) ||
		got.Response == nil || !bytes.Equal(got.Response.Body, out) || !bytes.Equal(got.Trigger.Body, r.Trigger.Body) {
		t.Fatalf("finished run: status %s, %d steps, output %d bytes, body %d bytes; want SUCCEEDED with all of it",
			got.Status, len(got.Steps), len(got.Steps[0].Output), len(got.Trigger.Body))
	}
	page, err := e.store.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("ListRuns = %d items, %v", len(page.Items), err)
	}
	// Lists hold summaries: no step output, no trigger body.
	if it := page.Items[0]; len(it.Steps[0].Output) != 0 || len(it.Trigger.Body) != 0 {
		t.Errorf("list item carries output %.40q and body %.40q, want a summary", it.Steps[0].Output, it.Trigger.Body)
	}

	// Deleting the flow deletes the run's objects.
	if n := objects(t, e, "runs/"+r.ID+"/"); n != 2 {
		t.Fatalf("%d payload objects for the run, want 2 (trigger, steps)", n)
	}
	if err := e.store.DeleteFlow(ctx, f.Project, f.ID); err != nil {
		t.Fatal(err)
	}
	if n := objects(t, e, "runs/"+r.ID+"/"); n != 0 {
		t.Fatalf("%d payload objects left after DeleteFlow", n)
	}
}

// objects counts the objects under a prefix of the payload bucket.
func objects(t *testing.T, e *env, prefix string) int {
	t.Helper()
	out, err := e.s3.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &e.bucket, Prefix: &prefix})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

// stubSQS fails SendMessage, after running before (if set).
type stubSQS struct {
	before func()
	calls  int
	mu     sync.Mutex
}

func (s *stubSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if s.before != nil {
		s.before()
	}
	return nil, errors.New("injected: SQS unavailable")
}

// TestSendFailureRemovesRun: a run whose message could not be sent is
// removed again, so the error (a 503 to the sender) is the whole story and
// the sender's retry with the same ID can succeed.
func TestSendFailureRemovesRun(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	f := fixture(t, e.store)
	r := newRun(f, `{"data":`+jsonString(400<<10, "z")+`}`) // with a payload object too
	failing := sqsqueue.New(e.store, &stubSQS{}, e.url)
	err := failing.Enqueue(ctx, r)
	if err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("Enqueue with a failing SendMessage = %v, want the send error, run removed", err)
	}
	if _, err := e.store.Run(ctx, f.Project, f.ID, r.ID); !automation.IsNotFound(err) {
		t.Fatalf("the run of an unsent message is still there: %v", err)
	}
	if m, ok := receive(t, e.sqs, e.url); ok {
		t.Fatalf("a message was sent: %s", aws.ToString(m.Body))
	}
	if err := e.queue.Enqueue(ctx, r); err != nil {
		t.Fatalf("retry of the same run ID: %v", err)
	}
	if m, ok := receive(t, e.sqs, e.url); !ok || !strings.Contains(aws.ToString(m.Body), r.ID) {
		t.Fatalf("retry sent %q, %v; want a message for %s", aws.ToString(m.Body), ok, r.ID)
	}
}

// TestSendFailureAfterClaim: if the run was claimed before the undo, its
// message reached the runner after all (the send's answer was lost), and
// Enqueue succeeds.
func TestSendFailureAfterClaim(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	f := fixture(t, e.store)
	r := newRun(f, `{}`)
	stub := &stubSQS{before: func() {
		if _, err := e.store.ClaimRun(ctx, f.Project, r.ID, time.Now(), time.Minute); err != nil {
			t.Errorf("claim during send: %v", err)
		}
	}}
	if err := sqsqueue.New(e.store, stub, e.url).Enqueue(ctx, r); err != nil {
		t.Fatalf("Enqueue of a run claimed during the send = %v, want nil", err)
	}
	if _, err := e.store.Run(ctx, f.Project, f.ID, r.ID); err != nil {
		t.Fatalf("the claimed run was removed: %v", err)
	}
}

// stubRuns records CreateRun calls.
type stubRuns struct{ created int }

func (s *stubRuns) CreateRun(context.Context, automation.Run) error          { s.created++; return nil }
func (s *stubRuns) DeleteUnclaimedRun(context.Context, string, string) error { return nil }

func TestMessageGuard(t *testing.T) {
	runs, stub := &stubRuns{}, &stubSQS{}
	q := sqsqueue.New(runs, stub, "http://127.0.0.1:1/queue")
	r := automation.Run{ID: "run_x", Project: strings.Repeat("p", sqsqueue.MaxMessageBytes), FlowID: "flw_x"}
	err := q.Enqueue(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "SQS limit") {
		t.Fatalf("Enqueue of an oversized message = %v", err)
	}
	if runs.created != 0 || stub.calls != 0 {
		t.Fatalf("an oversized message wrote %d runs and sent %d messages, want none", runs.created, stub.calls)
	}
	body, err := sqsqueue.Message(automation.Run{ID: "run_1", Project: "prj_1"})
	if err != nil || string(body) != `{"kind":"run","project":"prj_1","runId":"run_1"}` {
		t.Fatalf("Message = %s, %v", body, err)
	}
}

// TestRedelivery: a message received and not deleted comes back once its
// visibility timeout has passed; executing it twice is harmless because
// the runner claims the run (dynamostore's conditional write).
func TestRedelivery(t *testing.T) {
	e := newEnv(t, map[string]string{"VisibilityTimeout": "1"})
	ctx := t.Context()
	f := fixture(t, e.store)
	r := newRun(f, `{}`)
	if err := e.queue.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	first, ok := receive(t, e.sqs, e.url)
	if !ok || receiveCount(first) != "1" {
		t.Fatalf("first receive: %v, count %q", ok, receiveCount(first))
	}
	if m, ok := receive(t, e.sqs, e.url); ok {
		t.Fatalf("message visible again within its visibility timeout: %s", aws.ToString(m.MessageId))
	}
	var second sqstypes.Message
	testwait.For(t, 30*time.Second, "the message's redelivery after its visibility timeout", func() bool {
		second, ok = receive(t, e.sqs, e.url)
		return ok
	})
	if aws.ToString(second.MessageId) != aws.ToString(first.MessageId) || receiveCount(second) != "2" ||
		aws.ToString(second.Body) != aws.ToString(first.Body) {
		t.Fatalf("redelivered %s (count %s), want %s again with count 2", aws.ToString(second.MessageId), receiveCount(second), aws.ToString(first.MessageId))
	}
	if _, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &e.url, ReceiptHandle: second.ReceiptHandle}); err != nil {
		t.Fatalf("delete with the second receipt handle: %v", err)
	}
	// The event the check follows: a sentinel received after the delete
	// and left undeleted comes back once the same visibility timeout has
	// passed, which would have brought the deleted message back too.
	sentinel := "sentinel"
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &e.url, MessageBody: &sentinel}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the sentinel's first delivery", func() bool {
		m, ok := receive(t, e.sqs, e.url)
		if ok && aws.ToString(m.Body) != sentinel {
			t.Fatalf("deleted message came back: %s", aws.ToString(m.MessageId))
		}
		return ok
	})
	testwait.For(t, 30*time.Second, "the sentinel's redelivery", func() bool {
		m, ok := receive(t, e.sqs, e.url)
		if ok && aws.ToString(m.Body) != sentinel {
			t.Fatalf("deleted message came back: %s", aws.ToString(m.MessageId))
		}
		return ok
	})
	// The sentinel is in flight again: anything visible now is the other.
	if m, ok := receive(t, e.sqs, e.url); ok {
		t.Fatalf("deleted message came back: %s", aws.ToString(m.MessageId))
	}
}

// TestRedrive: with maxReceiveCount 2, a message received twice and never
// deleted goes to the dead-letter queue. moto (5.x, sqs/models.py
// receive_message) moves a visible message whose receive count has reached
// maxReceiveCount to the DLQ during the next receive instead of returning
// it, so the third receive of the main queue comes back empty and the DLQ
// holds the message, body unchanged. SQS likewise moves it when a receive
// would exceed the count.
func TestRedrive(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	dlqURL := createQueue(t, e.sqs, awstest.UniqueName(t, "dlq"), nil)
	attrs, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &dlqURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], "maxReceiveCount": "2",
	})
	url := createQueue(t, e.sqs, awstest.UniqueName(t, "runs"), map[string]string{
		"VisibilityTimeout": "1", "RedrivePolicy": string(policy),
	})
	q := sqsqueue.New(e.store, e.sqs, url)
	f := fixture(t, e.store)
	r := newRun(f, `{}`)
	if err := q.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	first, ok := receive(t, e.sqs, url)
	if !ok || receiveCount(first) != "1" {
		t.Fatalf("first receive: %v, count %q; want the message, count 1", ok, receiveCount(first))
	}
	testwait.For(t, 30*time.Second, "the second delivery, after the visibility timeout", func() bool {
		m, ok := receive(t, e.sqs, url)
		if ok && receiveCount(m) != "2" {
			t.Fatalf("second delivery has count %q, want 2", receiveCount(m))
		}
		return ok
	})
	// Once visible again, the next receive of the main queue moves the
	// message to the DLQ instead of returning it.
	var m sqstypes.Message
	testwait.For(t, 30*time.Second, "the message in the DLQ after maxReceiveCount receives", func() bool {
		if again, ok := receive(t, e.sqs, url); ok {
			t.Fatalf("the main queue delivered the message a third time (count %q), want it moved to the DLQ", receiveCount(again))
		}
		m, ok = receive(t, e.sqs, dlqURL)
		return ok
	})
	var qm automation.QueueMessage
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &qm); err != nil || qm.RunID != r.ID || qm.Project != f.Project {
		t.Fatalf("DLQ message %s, %v; want the run's message", aws.ToString(m.Body), err)
	}
}

// recordingSQS keeps the messages it sends and their delays.
type recordingSQS struct {
	mu     sync.Mutex
	delays []int32
	bodies []string
}

func (s *recordingSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays = append(s.delays, in.DelaySeconds)
	s.bodies = append(s.bodies, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{}, nil
}

// A waiting run's message is sent again with the wait as its delay, cut to
// SQS's 15 minutes, and carries when the run is due (notBefore) so that an
// early delivery is sent on; on moto the delayed message is not visible at
// once.
func TestEnqueueAfterDelays(t *testing.T) {
	rec := &recordingSQS{}
	q := sqsqueue.New(nil, rec, "http://queue.test/runs")
	r := automation.Run{ID: "run_1", Project: "prj_1"}
	now := time.Now()
	for _, d := range []time.Duration{90 * time.Second, 2 * time.Hour, -time.Second} {
		if err := q.EnqueueAfter(t.Context(), r, now.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.delays; len(got) != 3 || got[0] < 88 || got[0] > 90 || got[1] != 900 || got[2] != 0 {
		t.Errorf("delays %v, want [~90 900 0]", got)
	}
	var m automation.QueueMessage
	if err := json.Unmarshal([]byte(rec.bodies[1]), &m); err != nil || m.RunID != "run_1" || m.NotBefore == nil || !m.NotBefore.Equal(now.Add(2*time.Hour).UTC()) {
		t.Errorf("message %s (%v)", rec.bodies[1], err)
	}

	e := newEnv(t, nil)
	if err := e.queue.EnqueueAfter(t.Context(), r, time.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if m, ok := receive(t, e.sqs, e.url); ok {
		t.Errorf("a delayed message was visible at once: %s", aws.ToString(m.Body))
	}
}
