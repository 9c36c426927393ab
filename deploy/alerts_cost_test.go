package deploy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
)

// Recorded DynamoDB cost of the run of a failed flow builder webhook on a
// stage with an alerts table, as docs/cost.md prices it: without a
// subscription (the run path as without alerts), and with one that takes
// run.failed (the finish and its event in one transaction, then the
// delivery). TestDynamoCostOfAnAlert fails when either grows.
const (
	maxQuietRunCalls       = 5
	maxQuietRunWriteUnits  = 10
	maxAlertRunCalls       = 10
	maxAlertRunWriteUnits  = 29
	maxAlertRunReadUnits   = 3
	maxQuietRunReadUnits   = 1
	alertCostFailingStatus = http.StatusInternalServerError
)

// TestDynamoCostOfAnAlert counts, on moto, the DynamoDB calls and units of
// the runner's handling of one failed run, warm, on a stage with an alerts
// table: first with no subscription in the project (which must cost what
// a run costs without alerts: no request more), then with a subscription
// to run.failed, where the runner also sends the alert.
func TestDynamoCostOfAnAlert(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	st.cfg.Tables.Alerts = st.cfg.Tables.Runs + "-alerts"
	db := dynamodb.NewFromConfig(st.aws)
	if err := dynamostore.CreateTables(ctx, db, st.cfg.Tables); err != nil {
		t.Fatal(err)
	}
	meter := newDynamoMeter(db, st.cfg.Tables)
	metered := st.aws.Copy()
	metered.APIOptions = append(metered.APIOptions, meter.Add)
	st.cfg.AllowPrivateNetworks = true // the services are loopback fakes
	st.cfg.RunPolicy = automation.RunPolicy{MaxAttempts: 1}
	hook, err := awsapp.NewWebhookHandler(ctx, st.aws, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, metered, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := external(t, alertCostFailingStatus)
	var alerted atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		alerted.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	f := st.flow(t, fmt.Sprintf(`{"name": "Deploys", "engine": "FLOW_BUILDER",
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q}]}`, ext.URL), true)

	runOnce := func() (calls int, desc string, wcu, rcu float64) {
		t.Helper()
		if status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", `{"ref": "main"}`); status != 200 {
			t.Fatalf("webhook = %d %v", status, acc)
		}
		meter.reset()
		delivered := 0
		for j := 0; j < 5 && delivered == 0; j++ {
			if delivered, err = awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner); err != nil {
				t.Fatal(err)
			}
		}
		detail := meter.details()
		ops, w, r := meter.reset()
		n, d := meter.calls(ops)
		t.Logf("detail: %s", detail)
		return n, d, w, r
	}
	runOnce() // cold: the runner loads the project's (empty) subscriptions once
	quietCalls, quietDesc, quietWCU, quietRCU := runOnce()
	t.Logf("failed run, no subscription: %d calls (%s), %.0f write units, %.1f read units", quietCalls, quietDesc, quietWCU, quietRCU)
	if quietCalls > maxQuietRunCalls || quietWCU > maxQuietRunWriteUnits || quietRCU > maxQuietRunReadUnits {
		t.Errorf("without a subscription a run costs %d calls, %.0f write and %.1f read units; want at most %d, %d and %d (docs/cost.md)",
			quietCalls, quietWCU, quietRCU, maxQuietRunCalls, maxQuietRunWriteUnits, maxQuietRunReadUnits)
	}

	svc, err := alerts.NewService(alerts.Config{Store: dynamostore.New(db, st.cfg.Tables), Flows: st.store, Client: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateSubscription(ctx, st.project, alerts.Input{URL: receiver.URL, Events: []string{alerts.EventRunFailed}}); err != nil {
		t.Fatal(err)
	}
	// A fresh runner, as after the 30 s the cached subscriptions live.
	if runner, err = awsapp.NewRunnerHandler(ctx, metered, st.cfg); err != nil {
		t.Fatal(err)
	}
	runOnce() // loads the subscription
	before := alerted.Load()
	calls, desc, wcu, rcu := runOnce()
	if alerted.Load() != before+1 {
		t.Fatalf("the run sent %d alerts, want 1", alerted.Load()-before)
	}
	t.Logf("failed run and its alert: %d calls (%s), %.0f write units, %.1f read units", calls, desc, wcu, rcu)
	if calls > maxAlertRunCalls || wcu > maxAlertRunWriteUnits || rcu > maxAlertRunReadUnits {
		t.Errorf("a run and its alert cost %d calls, %.0f write and %.1f read units; want at most %d, %d and %d (docs/cost.md)",
			calls, wcu, rcu, maxAlertRunCalls, maxAlertRunWriteUnits, maxAlertRunReadUnits)
	}
}
