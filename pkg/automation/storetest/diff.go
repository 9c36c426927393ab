package storetest

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"flowservice/pkg/automation"
)

// recordOptions compare records as stores keep them: raw JSON by meaning
// (stores may reformat it), times with Equal (cmp uses the method), and
// empty slices and maps as nil (stores may decode either). Every field is
// compared except those named in ignored, so that a field one adapter
// forgets to store fails the suite.
var recordOptions = []cmp.Option{
	cmp.Comparer(equalJSON),
	cmp.FilterValues(func(x, y any) bool {
		_, raw := x.(json.RawMessage)
		return !raw
	}, cmpopts.EquateEmpty()),
}

// ignored lists the fields the suite does not compare, and why.
var ignored = []cmp.Option{
	// Views the Service computes from Flow.Stats; stores fill only Stats.
	cmpopts.IgnoreFields(automation.Flow{}, "RunCount", "SuccessRate", "LastRun"),
	// What a flow write stores beside the flow (versions.go), never read
	// back as part of it: testFlowVersions and testFlowDraft read it.
	cmpopts.IgnoreFields(automation.Flow{}, "VersionWrites"),
	// What ClaimRun reports about one claim, not part of the record that
	// Run reads back (testRunFencing and testRunCrashes check them).
	cmpopts.IgnoreFields(automation.Run{}, "LeaseToken", "Interrupted"),
}

// wantSame fails the test when got differs from want, showing the diff.
// extra ignores more fields, for a check that expects them to differ.
func wantSame[T any](t *testing.T, what string, got, want T, extra ...cmp.Option) {
	t.Helper()
	opts := append(append(append([]cmp.Option{}, recordOptions...), ignored...), extra...)
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", what, d)
	}
}

// equalJSON reports whether two raw JSON values mean the same.
func equalJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(va, vb)
}
