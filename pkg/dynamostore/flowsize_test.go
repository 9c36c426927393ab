package dynamostore_test

import (
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestFlowItemSizeError: a flow write DynamoDB refuses for its item's size
// (moto counts an update's old and new item together, so updating a flow
// of 250 KB to 300 KB is refused though each is under 400 KB; DynamoDB's
// own estimate may differ from ItemSize's) is 400 FLOW_TOO_LARGE, as the
// store's own size check is, not a bare error that answers 500.
func TestFlowItemSizeError(t *testing.T) {
	store, _, _ := newStore(t)
	ctx := t.Context()
	f := newFlow("prj_size", "flw_size", 0)
	f.Description = strings.Repeat("d", 250<<10)
	if err := store.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Description = strings.Repeat("e", 300<<10)
	f.Version++
	err := store.PutFlow(ctx, f)
	t.Logf("put: %v", err)
	wantCode(t, err, automation.ErrInvalid, "FLOW_TOO_LARGE")
}
