package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/internal/dbtest"
	"flowservice/internal/smtptest"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
)

// Recorded DynamoDB cost of a warm run of one step of each type on the
// runner function, in a project of 4 connections (docs/cost.md, "What
// each step type adds"). Beside the one-HTTP-step run's (maxRun*), a step
// that names its connection lists the project's connections when the
// attempt starts (a Query of the connections' byProject index, 0.5 read
// unit, and a BatchGetItem of the 4, 2 units) and reads the connection's
// record (1 unit; its secret comes from the minute's cache). An AI step
// reads the record twice, journals the model's answer (a
// TransactWriteItems of the run's journalLen and the entry, 4 units) and
// adds the turn's tokens to the project's day (an UpdateItem ADD on the
// projects table, 1 unit: aiTokensPerDay). The
// finish writes 1 unit less than the HTTP step's run for a small output.
var maxStepCost = map[string]struct {
	calls    int
	wcu, rcu float64
}{
	"EMAIL":  {8, 9, 4.5},
	"SQL":    {8, 10, 4.5},
	"ACTION": {8, 9, 4.5},
	"AI":     {10, 15, 4.5},
}

// TestDynamoCostPerStepType runs one flow per step type (EMAIL through a
// go-smtp server, SQL on a real PostgreSQL, a catalog ACTION and a
// one-turn AI step against doubles) through the runner function on moto,
// twice, and holds the warm run's DynamoDB calls and units to
// maxStepCost.
func TestDynamoCostPerStepType(t *testing.T) {
	pgPort := dbtest.StartPostgres(t)
	mail := smtptest.Start(t, true)
	double := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/chat/completions" {
			json.NewEncoder(w).Encode(map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-test",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})
			return
		}
		io.WriteString(w, `{"ok": true, "ts": "1.5", "channel": "C1"}`)
	}))
	defer double.Close()

	st := newStack(t)
	ctx := context.Background()
	meter := newDynamoMeter(dynamodb.NewFromConfig(st.aws), st.cfg.Tables)
	meter.limitsApart = true
	metered := st.aws.Copy()
	metered.APIOptions = append(metered.APIOptions, meter.Add)
	st.cfg.AllowPrivateNetworks = true // the servers are on loopback
	st.cfg.RootCAs = mail.Pool
	hook, err := awsapp.NewWebhookHandler(ctx, st.aws, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, metered, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []automation.ConnectionInput{
		{Name: "mail", App: "smtp", Type: automation.ConnectionSMTP, Value: json.RawMessage(fmt.Sprintf(
			`{"host": "127.0.0.1", "port": %d, "username": %q, "password": %q, "from": "flows@example.com"}`, mail.Port, smtptest.User, smtptest.Password))},
		{Name: "db", App: "postgres", Type: automation.ConnectionPostgres, Value: json.RawMessage(fmt.Sprintf(
			`{"host": "127.0.0.1", "port": %d, "database": "postgres", "username": "postgres", "tls": "disable"}`, pgPort))},
		{Name: "slack", App: "slack", Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey": "xoxb-1"}`), BaseURL: double.URL},
		{Name: "model", App: "openai", Type: automation.ConnectionOpenAI, AllowedHosts: []string{"127.0.0.1"},
			Value: json.RawMessage(fmt.Sprintf(`{"apiKey": "sk-1", "baseUrl": %q}`, double.URL+"/v1"))},
	} {
		if _, err := st.svc.CreateConnection(ctx, st.project, c); err != nil {
			t.Fatalf("connection %s: %v", c.Name, err)
		}
	}
	for _, c := range []struct{ typ, step string }{
		{"EMAIL", `{"name": "s", "type": "EMAIL", "connection": "mail", "to": ["ada@example.com"], "subject": "Hi", "text": "{{ trigger.body.ref }}"}`},
		{"SQL", `{"name": "s", "type": "SQL", "connection": "db", "query": "select $1::text as ref", "params": ["{{ trigger.body.ref }}"]}`},
		{"ACTION", `{"name": "s", "type": "ACTION", "action": "slack.post_message", "connection": "slack", "input": {"channel": "#ops", "text": "{{ trigger.body.ref }}"}}`},
		{"AI", `{"name": "s", "type": "AI", "connection": "model", "model": "gpt-test", "prompt": "Say ok about {{ trigger.body.ref }}"}`},
	} {
		t.Run(c.typ, func(t *testing.T) {
			f := st.flow(t, fmt.Sprintf(`{"name": "cost %s", "engine": "FLOW_BUILDER", "steps": [%s]}`, c.typ, c.step), true)
			var calls, wcu, rcu float64
			for i := range 2 { // the second run: warm pools and caches
				status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", `{"ref": "main"}`)
				runID, _ := acc["runId"].(string)
				if status != 200 || runID == "" {
					t.Fatalf("webhook = %d %v", status, acc)
				}
				meter.reset()
				for j := 0; j < 5; j++ {
					n, err := awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner)
					if err != nil {
						t.Fatal(err)
					}
					if n > 0 {
						break
					}
				}
				detail := meter.details()
				ops, w, rd := meter.reset()
				done, err := st.store.Run(ctx, st.project.ID, f.ID, runID)
				if err != nil || done.Status != automation.RunSucceeded {
					t.Fatalf("run %d = %s %v: %s (%s)", i, done.Status, err, done.Error, stepErrors(done))
				}
				n, desc := meter.calls(ops)
				calls, wcu, rcu = float64(n), w, rd
				if i == 1 {
					t.Logf("%s step, warm run: %d DynamoDB calls (%s), about %.0f write units, %.1f read units: %s", c.typ, n, desc, w, rd, detail)
				}
			}
			want := maxStepCost[c.typ]
			if calls > float64(want.calls) || wcu > want.wcu || rcu > want.rcu {
				t.Errorf("%s step run: %.0f calls, %.0f write units, %.1f read units; recorded at most %d, %.0f, %.1f (docs/cost.md)",
					c.typ, calls, wcu, rcu, want.calls, want.wcu, want.rcu)
			}
		})
	}
}

func stepErrors(r automation.Run) string {
	var out string
	for _, s := range r.Steps {
		out += s.Name + ": " + s.Error + "; "
	}
	return out
}
