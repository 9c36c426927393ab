package dynamostore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// TestAuditExpires: the audit table has TTL on expiresAt, and each entry
// expires automation.AuditRetention after its time (moto never deletes
// expired items, so the attribute is what can be checked).
func TestAuditExpires(t *testing.T) {
	ctx := t.Context()
	s, client, tables := newStore(t)
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &tables.Audit})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled || *d.AttributeName != "expiresAt" {
		t.Fatalf("audit table TTL = %+v, want enabled on expiresAt", d)
	}
	e := automation.AuditEntry{ID: automation.NewID(automation.PrefixAudit), Project: "prj_1", Time: base,
		Action: "flow.update", Resource: automation.AuditResource{Type: "flow", ID: "flw_1"}}
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &tables.Audit})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("scan audit table: %d items, %v", len(out.Items), err)
	}
	n, _ := out.Items[0]["expiresAt"].(*types.AttributeValueMemberN)
	if want := strconv.FormatInt(base.Add(90*24*time.Hour).Unix(), 10); n == nil || n.Value != want {
		t.Errorf("expiresAt = %v, want %s (90 days on)", out.Items[0]["expiresAt"], want)
	}
}
