package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

// A POLL flow's poll state: zero at first, replaced by each update (a full
// window of 10,000 key hashes included), invisible to other projects and
// other flows, and gone with the flow.
func testPollState(t *testing.T, s automation.Store) {
	ps, ok := s.(automation.PollStore)
	if !ok {
		t.Fatalf("%T is not an automation.PollStore", s)
	}
	ctx := context.Background()
	f := sampleFixture(t, s)
	g := flowBuilderWebhook(f.Project, "other", now())
	must(t, "create flow", s.CreateFlow(ctx, g))
	got, err := ps.PollState(ctx, f.Project, f.ID)
	must(t, "PollState", err)
	if diff := cmp.Diff(automation.PollState{}, got); diff != "" {
		t.Fatalf("PollState before any poll (-want +got):\n%s", diff)
	}

	at := now()
	want := automation.PollState{Primed: true, LastPolledAt: &at, LastError: "GET https://api.example.com/items answered 500",
		LastErrorAt: &at, LastRuns: 3, Seen: bytes.Repeat([]byte{0xfe, 0x01, 0x00, 0x7f}, 30_000)}
	must(t, "UpdatePollState", ps.UpdatePollState(ctx, f.Project, f.ID, func(cur automation.PollState) (automation.PollState, error) {
		if cur.Primed || cur.Seen != nil {
			t.Errorf("change saw %+v, want the zero state", cur)
		}
		return want, nil
	}))
	got, err = ps.PollState(ctx, f.Project, f.ID)
	must(t, "PollState", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("PollState after an update (-want +got):\n%s", diff)
	}
	must(t, "UpdatePollState", ps.UpdatePollState(ctx, f.Project, f.ID, func(cur automation.PollState) (automation.PollState, error) {
		cur.Primed, cur.LastError, cur.LastErrorAt = false, "", nil
		return cur, nil
	}))
	got, err = ps.PollState(ctx, f.Project, f.ID)
	must(t, "PollState", err)
	if got.Primed || got.LastError != "" || len(got.Seen) != 120_000 || !got.LastPolledAt.Equal(at) {
		t.Errorf("after a second update: primed %v, lastError %q, %d seen bytes, lastPolledAt %v", got.Primed, got.LastError, len(got.Seen), got.LastPolledAt)
	}

	// A refusing change leaves the state as it was, and its error comes back.
	refused := errors.New("refused")
	if err := ps.UpdatePollState(ctx, f.Project, f.ID, func(automation.PollState) (automation.PollState, error) {
		return automation.PollState{}, refused
	}); !errors.Is(err, refused) {
		t.Errorf("refused change: err = %v", err)
	}
	if got, _ := ps.PollState(ctx, f.Project, f.ID); len(got.Seen) != 120_000 {
		t.Errorf("a refused change changed the state")
	}

	// Another flow and another project see nothing; another project cannot write.
	if got, err := ps.PollState(ctx, g.Project, g.ID); err != nil || got.LastPolledAt != nil {
		t.Errorf("another flow reads %+v, %v", got, err)
	}
	other := automation.NewID(automation.PrefixProject)
	if got, err := ps.PollState(ctx, other, f.ID); err != nil || got.LastPolledAt != nil {
		t.Errorf("another project reads %+v, %v", got, err)
	}
	wantKind(t, "UpdatePollState in another project", ps.UpdatePollState(ctx, other, f.ID, func(st automation.PollState) (automation.PollState, error) {
		return st, nil
	}), automation.ErrNotFound, "FLOW_NOT_FOUND")

	must(t, "DeleteFlow", s.DeleteFlow(ctx, f.Project, f.ID))
	if got, err := ps.PollState(ctx, f.Project, f.ID); err != nil || got.LastPolledAt != nil {
		t.Errorf("a deleted flow's poll state reads %+v, %v", got, err)
	}
	wantKind(t, "UpdatePollState of a deleted flow", ps.UpdatePollState(ctx, f.Project, f.ID, func(st automation.PollState) (automation.PollState, error) {
		st.LastPolledAt = &at
		return st, nil
	}), automation.ErrNotFound, "FLOW_NOT_FOUND")
}
