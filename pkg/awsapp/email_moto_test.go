package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/internal/smtptest"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// TestEmailOnMoto is the Lambda path of EMAIL steps: the api function
// stores an SMTP connection (its password in Secrets Manager), the runner
// function sends through a real SMTP server requiring STARTTLS before
// authentication, the project's outboundPerMinute is taken from its
// DynamoDB bucket, and a header brought in by the trigger's data fails the
// step with nothing sent.
func TestEmailOnMoto(t *testing.T) {
	ctx := context.Background()
	mail := smtptest.Start(t, true)
	st := newMotoStage(t, "email", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true, RootCAs: mail.Pool})
	// A TEAM project: its outboundPerMinute (6000) is a DynamoDB bucket,
	// where ENTERPRISE's has no limit to count against.
	admin, err := awsdev.NewAdminService(st.AWS, st.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	project, err := admin.CreateProject(ctx, "team", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := admin.CreateAPIKey(ctx, project.ID)
	if err != nil {
		t.Fatal(err)
	}

	api, err := management.NewHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var conn struct{ ID string }
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "mail", "app": "smtp", "type": "SMTP",
		"value": {"host": "127.0.0.1", "port": %d, "username": %q, "password": %q, "from": "Flows <flows@example.com>", "tls": "starttls"}}`,
		mail.Port, smtptest.User, smtptest.Password), 201, &conn)
	var f struct{ ID string }
	call(api, "POST", "/api/v1/flows", `{"name": "welcome", "engine": "FLOW_BUILDER", "steps": [
		{"name": "mail", "type": "EMAIL", "connection": "mail", "to": ["{{ trigger.body.to }}"],
		 "subject": "Welcome {{ trigger.body.name }}", "text": "Hello {{ trigger.body.name }}", "replyTo": "support@example.com"}]}`, 201, &f)
	call(api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)

	sqsc := sqs.NewFromConfig(st.AWS)
	type stepRecord struct {
		Status, Error string
		Output        json.RawMessage
	}
	type runRecord struct {
		Status, Error string
		Steps         []stepRecord
	}
	deliver := func(body string) runRecord {
		t.Helper()
		var accepted struct{ RunID string }
		call(hook, "POST", "/api/v1/webhooks/"+f.ID, body, 200, &accepted)
		var r runRecord
		for range 20 {
			call(api, "GET", "/api/v1/flows/"+f.ID+"/runs/"+accepted.RunID, "", 200, &r)
			if r.Status != "RUNNING" {
				return r
			}
			if _, err := awsdev.PollOnce(ctx, sqsc, st.Cfg.QueueURL, time.Second, runner); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("run %s still %s after 20 polls of the queue", accepted.RunID, r.Status)
		return r
	}

	bucket := func() map[string]types.AttributeValue {
		t.Helper()
		out, err := dynamodb.NewFromConfig(st.AWS).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Cfg.Tables.Projects),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "bucket#outbound#" + project.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	if b := bucket(); b != nil {
		t.Fatalf("an outbound bucket before any send: %v", b)
	}

	r := deliver(`{"to": "ada@example.com", "name": "Ada"}`)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %+v", r)
	}
	msgs := mail.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if !m.TLS || m.User != smtptest.User || m.From != "flows@example.com" || strings.Join(m.To, ",") != "ada@example.com" {
		t.Errorf("envelope %+v: want STARTTLS, authenticated, from flows@, to ada@", m)
	}
	for _, want := range []string{"Subject: Welcome Ada", "To: <ada@example.com>", "Reply-To: <support@example.com>", "Hello Ada"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	id, _ := out["messageId"].(string)
	if len(out) != 1 || id == "" || !strings.Contains(m.Data, "Message-ID: <"+id+">") {
		t.Errorf("output %s: want {messageId} of the message sent", r.Steps[0].Output)
	}
	if b := bucket(); b["tat"] == nil {
		t.Errorf("the send took nothing from the project's outbound bucket: %v", b)
	}

	// A line break in a rendered subject would start a header of its own.
	r = deliver(`{"to": "eve@example.com", "name": "Eve\r\nBcc: victim@example.com"}`)
	if r.Status != "FAILED" || !strings.Contains(r.Steps[0].Error, "subject contains a line break") {
		t.Errorf("header injection: run %+v, want FAILED naming the subject", r)
	}
	if n := len(mail.Messages()); n != 1 {
		t.Errorf("%d messages after the injection attempt, want still 1", n)
	}
}
