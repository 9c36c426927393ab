package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// serialWrites makes one DynamoDB write at a time over HTTP: moto's server
// does not apply a conditional write atomically when requests arrive at
// once, which DynamoDB does (pkg/dynamostore's serialized says more), and
// the race below rests on exactly that guarantee.
type serialWrites struct {
	mu   sync.Mutex
	next aws.HTTPClient
}

func (s *serialWrites) Do(r *http.Request) (*http.Response, error) {
	switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.") {
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return s.next.Do(r)
}

// approvalStage is a moto stage with the api, webhook and runner
// functions, a clock the test may move, and a catcher for notify steps.
type approvalStage struct {
	t          *testing.T
	api, hook  awsapp.ProxyHandler
	runner     awsapp.SQSHandler
	sqs        *sqs.Client
	cfg        awsapp.Config
	key        string
	ahead      atomic.Int64 // the clock's lead over time.Now
	notified   chan map[string]any
	catcher    *httptest.Server
	afterCalls atomic.Int64 // requests of the steps after the wait
	aws        aws.Config
	engineURL  string
}

func newApprovalStage(t *testing.T, name string) *approvalStage {
	t.Helper()
	ctx := context.Background()
	st := &approvalStage{t: t, notified: make(chan map[string]any, 100), engineURL: "https://engine0api.example/dev"}
	st.catcher = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/after" {
			st.afterCalls.Add(1)
			return
		}
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		st.notified <- m
	}))
	t.Cleanup(st.catcher.Close)
	ms := newMotoStage(t, name, awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	st.aws, st.cfg, st.key = ms.AWS, ms.Cfg, ms.Key
	next := st.aws.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	st.aws.HTTPClient = &serialWrites{next: next}
	st.cfg.EngineURL = st.engineURL
	st.cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(st.ahead.Load())) }
	var err error
	if st.api, err = management.NewHandler(ctx, st.aws, st.cfg); err != nil {
		t.Fatal(err)
	}
	if st.hook, err = awsapp.NewWebhookHandler(ctx, st.aws, st.cfg); err != nil {
		t.Fatal(err)
	}
	if st.runner, err = awsapp.NewRunnerHandler(ctx, st.aws, st.cfg); err != nil {
		t.Fatal(err)
	}
	st.sqs = sqs.NewFromConfig(ms.AWS)
	return st
}

// call sends one request through a function and returns its answer.
func (st *approvalStage) call(h awsapp.ProxyHandler, method, path, contentType, body string, hdr ...string) events.APIGatewayProxyResponse {
	st.t.Helper()
	mv := map[string][]string{"Authorization": {"Bearer " + st.key}}
	if contentType != "" {
		mv["Content-Type"] = []string{contentType}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		mv[hdr[i]] = []string{hdr[i+1]}
	}
	p, query, _ := strings.Cut(path, "?")
	q, _ := url.ParseQuery(query)
	resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: method, Path: p, Body: body,
		MultiValueHeaders: mv, MultiValueQueryStringParameters: q,
		RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: p,
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
	if err != nil {
		st.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (st *approvalStage) must(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
	st.t.Helper()
	resp := st.call(h, method, path, "application/json", body)
	if resp.StatusCode != want {
		st.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, resp.Body, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
			st.t.Fatal(err)
		}
	}
}

func (st *approvalStage) enabled(def string) string {
	st.t.Helper()
	var f struct{ ID string }
	st.must(st.api, "POST", "/api/v1/flows", def, 201, &f)
	st.must(st.api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	return f.ID
}

func (st *approvalStage) trigger(flowID string) string {
	st.t.Helper()
	var accepted struct{ RunID string }
	st.must(st.hook, "POST", "/api/v1/webhooks/"+flowID, `{"amount": 120}`, 200, &accepted)
	return accepted.RunID
}

type waitRun struct {
	ID, Status, WaitingFor string
	Steps                  []struct {
		Name, Status string
		Attempts     int
		Output       json.RawMessage
	}
}

func (st *approvalStage) run(flowID, runID string) waitRun {
	st.t.Helper()
	var r waitRun
	st.must(st.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
	return r
}

// drive hands the runner what the queue holds now, as SQS would, until
// done says so; the queue running dry first fails the test.
func (st *approvalStage) drive(what string, done func() bool) {
	st.t.Helper()
	for range 60 {
		if done() {
			return
		}
		n, err := awsdev.PollOnce(context.Background(), st.sqs, st.cfg.QueueURL, time.Second, st.runner)
		if err != nil {
			st.t.Fatal(err)
		}
		if n == 0 && !done() {
			st.t.Fatalf("%s: the queue ran dry first", what)
		}
	}
	st.t.Fatalf("%s: not after 60 batches", what)
}

func (st *approvalStage) notice() map[string]any {
	st.t.Helper()
	select {
	case m := <-st.notified:
		return m
	default:
		st.t.Fatal("no notify request came")
	}
	return nil
}

// token is the token at the end of a link made on the engine URL.
func (st *approvalStage) token(link, path string) string {
	st.t.Helper()
	tok, ok := strings.CutPrefix(link, st.engineURL+path)
	if !ok || len(tok) != 43 {
		st.t.Fatalf("link %q is not %s%s<token>", link, st.engineURL, path)
	}
	return tok
}

func stepOut(t *testing.T, r waitRun, name string, into any) {
	t.Helper()
	for _, s := range r.Steps {
		if s.Name == name {
			if err := json.Unmarshal(s.Output, into); err != nil {
				t.Fatalf("step %s output %s: %v", name, s.Output, err)
			}
			return
		}
	}
	t.Fatalf("run has no step %s: %+v", name, r)
}

// TestApprovalOnMoto is the Lambda path of a person in the loop: an
// APPROVAL run parks in the runner, its link (on the engine URL, served by
// the webhook function) renders the page, the approval resumes the run and
// the step after it runs once; a second answer is 409 ALREADY_DECIDED with
// the decision; the approvals inbox of the api function lists it; a WAIT
// for a callback resumes with the POST's body, headers and time; an
// approval left alone times out at its expiry (the clock moved) and the
// run goes on with the decision "timeout".
func TestApprovalOnMoto(t *testing.T) {
	st := newApprovalStage(t, "approve")
	after := fmt.Sprintf(`{"name": "after", "type": "HTTP", "method": "POST", "url": %q, "body": {"d": "{{ steps.ok.decision }}"}}`,
		st.catcher.URL+"/after")
	flowID := st.enabled(fmt.Sprintf(`{"name": "refunds", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }}?", "timeout": "72h",
		 "form": {"type": "object", "properties": {"note": {"type": "string", "title": "Note"}}},
		 "notify": [{"name": "slack", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ approval.url }}"}}]},
		%s]}`, st.catcher.URL+"/notify", after))

	t.Run("link", func(t *testing.T) {
		st.t = t
		runID := st.trigger(flowID)
		st.drive("park", func() bool { return st.run(flowID, runID).WaitingFor == "APPROVAL" })
		link, _ := st.notice()["url"].(string)
		tok := st.token(link, "/approvals/")
		page := st.call(st.hook, "GET", "/approvals/"+tok, "", "")
		if page.StatusCode != 200 || !strings.Contains(page.Body, "Refund 120?") || !strings.Contains(page.Body, `name="note"`) ||
			strings.Contains(page.Body, "<script") {
			t.Fatalf("page = %d %s", page.StatusCode, page.Body)
		}
		// The api function serves the same page on the management URL.
		if page := st.call(st.api, "GET", "/approvals/"+tok, "", ""); page.StatusCode != 200 || !strings.Contains(page.Body, "Refund 120?") {
			t.Fatalf("page on the api function = %d %s", page.StatusCode, page.Body)
		}
		var inbox struct {
			Data []struct{ RunID, Title string }
		}
		st.must(st.api, "GET", "/api/v1/approvals", "", 200, &inbox)
		if len(inbox.Data) != 1 || inbox.Data[0].RunID != runID || inbox.Data[0].Title != "Refund 120?" {
			t.Fatalf("pending approvals = %+v", inbox)
		}
		resp := st.call(st.hook, "POST", "/approvals/"+tok, "application/x-www-form-urlencoded",
			url.Values{"decision": {"approve"}, "note": {"ok"}}.Encode())
		if resp.StatusCode != 200 || !strings.Contains(resp.Body, "approved") {
			t.Fatalf("approve = %d %s", resp.StatusCode, resp.Body)
		}
		resp = st.call(st.hook, "POST", "/approvals/"+tok, "application/json", `{"decision": "reject"}`)
		if resp.StatusCode != 409 || !strings.Contains(resp.Body, `"ALREADY_DECIDED"`) || !strings.Contains(resp.Body, `"decision":"approved"`) {
			t.Fatalf("second answer = %d %s", resp.StatusCode, resp.Body)
		}
		calls := st.afterCalls.Load()
		st.drive("finish", func() bool { return st.run(flowID, runID).Status != "RUNNING" })
		r := st.run(flowID, runID)
		var out struct {
			Decision  string
			Values    map[string]any
			Decisions []struct{ Via string }
		}
		stepOut(t, r, "ok", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "approved" || out.Values["note"] != "ok" || len(out.Decisions) != 1 ||
			out.Decisions[0].Via != "link" || st.afterCalls.Load()-calls != 1 {
			t.Fatalf("run %+v, output %+v, step after ran %d times", r, out, st.afterCalls.Load()-calls)
		}
		var decided struct {
			Data []struct{ RunID, Decision string }
		}
		st.must(st.api, "GET", "/api/v1/approvals?status=DECIDED", "", 200, &decided)
		if len(decided.Data) != 1 || decided.Data[0].RunID != runID || decided.Data[0].Decision != "approved" {
			t.Fatalf("decided approvals = %+v", decided)
		}
		if resp := st.call(st.hook, "GET", "/approvals/"+strings.Repeat("A", 43), "", ""); resp.StatusCode != 404 ||
			strings.Contains(resp.Body, "refunds") {
			t.Fatalf("unknown token = %d %s", resp.StatusCode, resp.Body)
		}
	})

	t.Run("callback", func(t *testing.T) {
		st.t = t
		cbFlow := st.enabled(fmt.Sprintf(`{"name": "cb", "engine": "FLOW_BUILDER", "steps": [
			{"name": "job", "type": "WAIT", "for": "callback", "timeout": "1h",
			 "notify": [{"name": "start", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ wait.callbackUrl }}"}}]},
			{"name": "after", "type": "SET", "values": {"status": "{{ steps.job.body.status }}"}}]}`, st.catcher.URL+"/notify"))
		runID := st.trigger(cbFlow)
		st.drive("park", func() bool { return st.run(cbFlow, runID).WaitingFor == "CALLBACK" })
		link, _ := st.notice()["url"].(string)
		tok := st.token(link, "/api/v1/callbacks/")
		resp := st.call(st.hook, "POST", "/api/v1/callbacks/"+tok, "application/json", `{"status": "done"}`, "X-Job", "j1")
		if resp.StatusCode != 200 {
			t.Fatalf("callback = %d %s", resp.StatusCode, resp.Body)
		}
		if resp := st.call(st.hook, "POST", "/api/v1/callbacks/"+tok, "text/plain", "again"); resp.StatusCode != 409 ||
			!strings.Contains(resp.Body, "ALREADY_DECIDED") {
			t.Fatalf("second callback = %d %s", resp.StatusCode, resp.Body)
		}
		st.drive("finish", func() bool { return st.run(cbFlow, runID).Status != "RUNNING" })
		r := st.run(cbFlow, runID)
		var out struct {
			Body       map[string]any
			Headers    map[string]string
			ReceivedAt time.Time
		}
		stepOut(t, r, "job", &out)
		var set map[string]any
		stepOut(t, r, "after", &set)
		if r.Status != "SUCCEEDED" || out.Body["status"] != "done" || out.Headers["x-job"] != "j1" || out.Headers["authorization"] != "" ||
			out.ReceivedAt.IsZero() || set["status"] != "done" {
			t.Fatalf("run %+v, job %+v, after %v", r, out, set)
		}
	})

	// The decision commits, but the message that should wake the run is
	// lost (SQS down past the retries, or the function killed between
	// the commit and the send): the run resumes at the next delivery of
	// its delayed message, which SQS brings back every 15 minutes, not at
	// the waitpoint's expiry 72 hours on. The step after runs once, though
	// two copies of that message come at once.
	t.Run("lost wake", func(t *testing.T) {
		st.t = t
		runID := st.trigger(flowID)
		st.drive("park", func() bool { return st.run(flowID, runID).WaitingFor == "APPROVAL" })
		st.notice()
		st.must(st.api, "POST", "/api/v1/runs/"+runID+"/approvals/ok", `{"decision": "approve"}`, 200, nil)
		if n := st.dropVisible(); n != 1 {
			t.Fatalf("dropped %d messages after the decision, want its one wake message", n)
		}
		if r := st.run(flowID, runID); r.Status != "RUNNING" {
			t.Fatalf("run %s before its next delivery", r.Status)
		}
		// The park's delayed message, due at the expiry, as it comes back
		// after 15 minutes (SQS's longest delay); sent now, twice.
		expiry := time.Now().Add(72 * time.Hour)
		project := st.projectID()
		msg, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: project, RunID: runID, NotBefore: &expiry})
		text := string(msg)
		for range 2 {
			if _, err := st.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &st.cfg.QueueURL, MessageBody: &text,
				MessageGroupId: aws.String(project)}); err != nil {
				t.Fatal(err)
			}
		}
		calls := st.afterCalls.Load()
		st.drive("resume at the next delivery", func() bool { return st.run(flowID, runID).Status != "RUNNING" })
		r := st.run(flowID, runID)
		var out struct{ Decision string }
		stepOut(t, r, "ok", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "approved" || st.afterCalls.Load()-calls != 1 {
			t.Fatalf("run %+v, output %+v, step after ran %d times", r, out, st.afterCalls.Load()-calls)
		}
		// What is left on the queue now finds the run finished: the step
		// does not run again.
		for range 10 {
			if n, err := awsdev.PollOnce(context.Background(), st.sqs, st.cfg.QueueURL, 0, st.runner); err != nil {
				t.Fatal(err)
			} else if n == 0 {
				break
			}
		}
		if n := st.afterCalls.Load() - calls; n != 1 {
			t.Fatalf("step after ran %d times", n)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		st.t = t
		runID := st.trigger(flowID)
		st.drive("park", func() bool { return st.run(flowID, runID).WaitingFor == "APPROVAL" })
		link, _ := st.notice()["url"].(string)
		tok := st.token(link, "/approvals/")
		// 73 hours on: past the expiry. The delayed message SQS holds
		// comes at its time; here it is sent now, as it would arrive then.
		st.ahead.Store(int64(73 * time.Hour))
		t.Cleanup(func() { st.ahead.Store(0) })
		expiry := time.Now().Add(72 * time.Hour)
		project := st.projectID()
		msg, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: project, RunID: runID, NotBefore: &expiry})
		text := string(msg)
		if _, err := st.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &st.cfg.QueueURL, MessageBody: &text,
			MessageGroupId: aws.String(project)}); err != nil {
			t.Fatal(err)
		}
		calls := st.afterCalls.Load()
		st.drive("time out", func() bool { return st.run(flowID, runID).Status != "RUNNING" })
		r := st.run(flowID, runID)
		var out struct{ Decision string }
		stepOut(t, r, "ok", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "timeout" || st.afterCalls.Load()-calls != 1 {
			t.Fatalf("run %+v, output %+v, step after ran %d times", r, out, st.afterCalls.Load()-calls)
		}
		if resp := st.call(st.hook, "GET", "/approvals/"+tok, "", ""); resp.StatusCode != 404 {
			t.Fatalf("expired link = %d %s", resp.StatusCode, resp.Body)
		}
	})
}

// dropVisible deletes every message the queue shows now, unread: a lost
// message. It returns how many it deleted.
func (st *approvalStage) dropVisible() int {
	st.t.Helper()
	n := 0
	for {
		out, err := st.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &st.cfg.QueueURL, MaxNumberOfMessages: 10})
		if err != nil {
			st.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return n
		}
		for _, m := range out.Messages {
			if _, err := st.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &st.cfg.QueueURL,
				ReceiptHandle: m.ReceiptHandle}); err != nil {
				st.t.Fatal(err)
			}
			n++
		}
	}
}

func (st *approvalStage) projectID() string {
	st.t.Helper()
	var p struct{ ID string }
	st.must(st.api, "GET", "/api/v1/project", "", 200, &p)
	return p.ID
}

// TestApprovalRaceOnMoto: 20 parked runs, each sent 5 answers at once
// through the api function (approve and reject alternately). None is lost
// or decided twice: exactly one answer per run wins, the others are 409
// ALREADY_DECIDED carrying the winner's decision, and every run resumes
// once with the winner's decision.
func TestApprovalRaceOnMoto(t *testing.T) {
	const runs, answers = 20, 5
	st := newApprovalStage(t, "approverace")
	flowID := st.enabled(`{"name": "race", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "go?"},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`)
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = st.trigger(flowID)
	}
	st.drive("park all", func() bool {
		var page struct{ Data []struct{ RunID string } }
		st.must(st.api, "GET", "/api/v1/approvals?limit=100", "", 200, &page)
		return len(page.Data) == runs
	})
	type result struct {
		code     int
		decision string
	}
	results := make([][]result, runs)
	var wg sync.WaitGroup
	for i, id := range ids {
		results[i] = make([]result, answers)
		for j := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := []string{"approve", "reject"}[j%2]
				resp, err := st.api(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST",
					Path: "/api/v1/runs/" + id + "/approvals/ok", Body: `{"decision": "` + d + `"}`,
					MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + st.key}},
					RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: "POST", Path: "/api/v1/runs/" + id + "/approvals/ok",
						Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
				if err != nil {
					results[i][j] = result{code: -1}
					return
				}
				var got struct{ Decision any }
				_ = json.Unmarshal([]byte(resp.Body), &got)
				res := result{code: resp.StatusCode}
				switch v := got.Decision.(type) {
				case string:
					res.decision = v
				case map[string]any:
					res.decision, _ = v["decision"].(string)
				}
				results[i][j] = res
			}()
		}
	}
	wg.Wait()
	st.drive("finish all", func() bool {
		for _, id := range ids {
			if st.run(flowID, id).Status == "RUNNING" {
				return false
			}
		}
		return true
	})
	for i, id := range ids {
		r := st.run(flowID, id)
		var out struct {
			Decision  string
			Decisions []any
		}
		stepOut(t, r, "ok", &out)
		var after map[string]string
		stepOut(t, r, "after", &after)
		wins := 0
		for _, res := range results[i] {
			switch res.code {
			case 200:
				wins++
			case 409:
			default:
				t.Errorf("run %s: an answer got %d", id, res.code)
			}
			if res.decision != out.Decision {
				t.Errorf("run %s: an answer (%d) was told %q, the run decided %q", id, res.code, res.decision, out.Decision)
			}
		}
		if wins != 1 || r.Status != "SUCCEEDED" || len(out.Decisions) != 1 || after["d"] != out.Decision {
			t.Errorf("run %s: %d winners, status %s, %d decisions recorded, after %v", id, wins, r.Status, len(out.Decisions), after)
		}
	}
}

// queued counts the visible messages on the run queue whose body is body,
// leaving every message visible as it was.
func (st *approvalStage) queued(body string) int {
	st.t.Helper()
	out, err := st.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &st.cfg.QueueURL,
		MaxNumberOfMessages: 10})
	if err != nil {
		st.t.Fatal(err)
	}
	n := 0
	for _, m := range out.Messages {
		if aws.ToString(m.Body) == body {
			n++
		}
		// Visible again at once: the SDK leaves a zero VisibilityTimeout
		// out of the receive, so the queue's default hid them.
		if _, err := st.sqs.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{
			QueueUrl: &st.cfg.QueueURL, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			st.t.Fatal(err)
		}
	}
	return n
}
