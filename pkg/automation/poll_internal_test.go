package automation

import (
	"strconv"
	"testing"
)

// remember keeps the latest MaxSeenKeys keys: the oldest drop out, and an
// item whose key dropped out counts as new again.
func TestRememberKeepsLatest(t *testing.T) {
	var seen []byte
	batch := func(from, n int) []PolledItem {
		var out []PolledItem
		for i := from; i < from+n; i++ {
			out = append(out, PolledItem{Key: "k" + strconv.Itoa(i)})
		}
		return out
	}
	seen = remember(seen, batch(0, MaxSeenKeys))
	seen = remember(seen, unseen(seen, batch(MaxSeenKeys-5, 10)))
	if len(seen) != MaxSeenKeys*seenHashBytes {
		t.Fatalf("%d keys kept, want %d", len(seen)/seenHashBytes, MaxSeenKeys)
	}
	if got := unseen(seen, batch(0, 5)); len(got) != 5 {
		t.Errorf("the 5 oldest keys are still seen: %d unseen", len(got))
	}
	if got := unseen(seen, batch(5, MaxSeenKeys)); len(got) != 0 {
		t.Errorf("%d of the latest keys count as unseen", len(got))
	}
}
