package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

// TestAlertsContract runs the alerts contract on moto: subscriptions,
// deliveries claimed through the byDue index, a run's finish writing its
// event's deliveries in the finish's transaction, and a waitpoint's write
// its approval event's in its own.
func TestAlertsContract(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server, which serves requests on threads
	storetest.RunAlerts(t, func(t *testing.T) storetest.AlertsEnv {
		client := dynamodb.NewFromConfig(awstest.Start(t))
		prefix := awstest.UniqueName(t, "fs")
		tables := dynamostore.TableNames(prefix)
		tables.Alerts = prefix + "-alerts"
		if err := dynamostore.CreateTables(t.Context(), client, tables); err != nil {
			t.Fatal(err)
		}
		s := dynamostore.New(&serialized{API: client}, tables)
		return storetest.AlertsEnv{
			RunEnv: storetest.RunEnv{Store: s, Runs: s, Create: s.CreateRun},
			Alerts: s, Waitpoints: s,
		}
	})
}

// TestAlertsTableExpires: CreateTables turns TTL on for the alerts table,
// so deliveries (which carry expiresAt) go after alerts.Retention.
func TestAlertsTableExpires(t *testing.T) {
	client := dynamodb.NewFromConfig(awstest.Start(t))
	prefix := awstest.UniqueName(t, "fs")
	tables := dynamostore.TableNames(prefix)
	tables.Alerts = prefix + "-alerts"
	if err := dynamostore.CreateTables(t.Context(), client, tables); err != nil {
		t.Fatal(err)
	}
	out, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: &tables.Alerts})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != "ENABLED" || d.AttributeName == nil || *d.AttributeName != "expiresAt" {
		t.Fatalf("alerts table TTL = %+v, want ENABLED on expiresAt", d)
	}
}
