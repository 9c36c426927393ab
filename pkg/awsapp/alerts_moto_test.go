package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
)

// TestAlertsOnMoto is the Lambda path of event subscriptions on moto: a
// subscription made through the api function; a failed run whose finish
// wrote its delivery in the same transaction; the runner that executed it
// sending the alert at once, which the receiver answers 503; and a fresh
// runner instance (a cold start, as after a crash) that a sweep message
// wakes sending it again, under the same webhook-id, verifiable by the
// official Standard Webhooks library.
func TestAlertsOnMoto(t *testing.T) {
	ctx := context.Background()
	st := newMotoStage(t, "alerts", awsapp.Config{Stage: "test", LogOutput: io.Discard,
		RunPolicy: automation.RunPolicy{MaxAttempts: 1}, AllowPrivateNetworks: true})
	awsCfg, cfg, key := st.AWS, st.Cfg, st.Key
	cfg.Tables.Alerts = st.Prefix + "-alerts"
	if err := dynamostore.CreateTables(ctx, dynamodb.NewFromConfig(awsCfg), cfg.Tables); err != nil {
		t.Fatal(err)
	}
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
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

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer broken.Close()
	var (
		mu     sync.Mutex
		ids    []string
		bodies []string
		secret string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			t.Errorf("official library refused a delivery: %v", err)
		}
		ids, bodies = append(ids, r.Header.Get("webhook-id")), append(bodies, string(body))
		if len(ids) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	var flow struct{ ID string }
	call(api, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "charge", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q}]}`, broken.URL), 201, &flow)
	call(api, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	var sub struct{ ID, Secret string }
	call(api, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": %q, "events": ["run.failed"]}`, receiver.URL), 201, &sub)
	mu.Lock()
	secret = sub.Secret
	mu.Unlock()

	var accepted struct{ RunID string }
	call(hook, "POST", "/api/v1/webhooks/"+flow.ID, `{"n": 1}`, 200, &accepted)
	sqsc := sqs.NewFromConfig(awsCfg)
	for i := 0; i < 5; i++ {
		if n, err := awsdev.PollOnce(ctx, sqsc, cfg.QueueURL, time.Second, runner); err != nil {
			t.Fatal(err)
		} else if n > 0 {
			break
		}
	}
	mu.Lock()
	first := len(ids)
	mu.Unlock()
	if first != 1 {
		t.Fatalf("the runner that finished the run sent %d alerts, want 1 at once", first)
	}

	// A fresh runner (the first one gone) and a sweep message after the
	// 5 s retry is due.
	fresh, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The retry comes due on the functions' own clock (awsapp takes none to
	// inject): sweeps are paced, as the schedule would send them.
	testwait.Paced(t, 500*time.Millisecond, "the alert's retry", func() bool {
		mu.Lock()
		n := len(ids)
		mu.Unlock()
		if n >= 2 {
			return true
		}
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &cfg.QueueURL, MessageBody: aws.String(awsapp.AlertsSweepBody)}); err != nil {
			t.Fatal(err)
		}
		if _, err := awsdev.PollOnce(ctx, sqsc, cfg.QueueURL, time.Second, fresh); err != nil {
			t.Fatal(err)
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	if ids[0] == "" || ids[1] != ids[0] || len(ids) != 2 {
		t.Fatalf("webhook-ids %v, want the same one twice", ids)
	}
	var ev struct {
		Type string
		Data struct {
			ID, FlowName string
			Error        struct{ Step string }
		}
	}
	if err := json.Unmarshal([]byte(bodies[1]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "run.failed" || ev.Data.ID != accepted.RunID || ev.Data.FlowName != "charge" || ev.Data.Error.Step != "call" {
		t.Fatalf("alert = %s", bodies[1])
	}
	var deliveries struct {
		Data []struct {
			Status   string
			Attempts int
		}
	}
	call(api, "GET", "/api/v1/subscriptions/"+sub.ID+"/deliveries", "", 200, &deliveries)
	if len(deliveries.Data) != 1 || deliveries.Data[0].Status != "SUCCEEDED" || deliveries.Data[0].Attempts != 2 {
		t.Fatalf("deliveries = %+v, want one SUCCEEDED after 2 attempts", deliveries.Data)
	}
}
