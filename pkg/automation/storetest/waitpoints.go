package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// RunWaitpoints runs the contract of automation.WaitpointStore (what
// APPROVAL steps and WAIT for a callback wait for) against the adapter
// open makes: a fresh, empty store each call.
func RunWaitpoints(t *testing.T, open func(t *testing.T) automation.WaitpointStore) {
	t.Run("OpenReadToken", func(t *testing.T) { testWaitpointOpen(t, open(t)) })
	t.Run("TokenReplaceVoid", func(t *testing.T) { testWaitpointToken(t, open(t)) })
	t.Run("ChangeError", func(t *testing.T) { testWaitpointChangeError(t, open(t)) })
	t.Run("FirstAnswerWins", func(t *testing.T) { testWaitpointFirstWins(t, open(t)) })
	t.Run("DistinctDeciders", func(t *testing.T) { testWaitpointNoLostAnswer(t, open(t)) })
	t.Run("Inbox", func(t *testing.T) { testWaitpointInbox(t, open(t)) })
}

// openWaitpoint opens a pending waitpoint of kind with a fresh token, as
// OpenWaitpoint does; it returns the waitpoint and the token's hash.
func openWaitpoint(t *testing.T, ws automation.WaitpointStore, project, runID, step string, kind automation.WaitpointKind, created time.Time) (automation.Waitpoint, string) {
	t.Helper()
	_, hash := automation.NewWaitpointToken()
	w, err := ws.UpdateWaitpoint(context.Background(), project, runID, step, func(w *automation.Waitpoint, found bool) (bool, error) {
		if found {
			return false, fmt.Errorf("waitpoint %s/%s exists already", runID, step)
		}
		*w = automation.Waitpoint{Project: project, RunID: runID, FlowID: "flw_1", FlowName: "refunds", Step: step, Kind: kind,
			Title: "Refund?", Approvals: 2, Roles: []string{"operator"}, Attempt: 1, Status: automation.WaitpointPending,
			Decisions: []automation.Decision{}, Created: created, ExpiresAt: created.Add(72 * time.Hour), TokenHash: hash}
		if kind == automation.WaitApproval {
			w.Form = []byte(`{"type":"object","properties":{"amount":{"type":"number"}}}`)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("open %s/%s: %v", runID, step, err)
	}
	return w, hash
}

func testWaitpointOpen(t *testing.T, ws automation.WaitpointStore) {
	ctx := context.Background()
	runID := automation.NewID(automation.PrefixRun)
	if _, err := ws.Waitpoint(ctx, "prj_a", runID, "ok"); !automation.IsNotFound(err) {
		t.Fatalf("Waitpoint before the open = %v, want not found", err)
	}
	opened, hash := openWaitpoint(t, ws, "prj_a", runID, "ok", automation.WaitApproval, now())
	got, err := ws.Waitpoint(ctx, "prj_a", runID, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != runID || got.Step != "ok" || got.Project != "prj_a" || got.Kind != automation.WaitApproval || got.Title != "Refund?" ||
		got.Approvals != 2 || got.Attempt != 1 || got.Status != automation.WaitpointPending || got.TokenHash != hash ||
		!got.Created.Equal(opened.Created) || !got.ExpiresAt.Equal(opened.ExpiresAt) || len(got.Roles) != 1 || string(got.Form) == "" {
		t.Fatalf("read back %+v, want %+v", got, opened)
	}
	byToken, err := ws.WaitpointByToken(ctx, hash)
	if err != nil || byToken.RunID != runID || byToken.Step != "ok" || byToken.Project != "prj_a" {
		t.Fatalf("WaitpointByToken = %+v, %v", byToken, err)
	}
	if _, err := ws.WaitpointByToken(ctx, automation.HashWaitpointToken("nosuch")); !automation.IsNotFound(err) {
		t.Fatalf("unknown token = %v, want not found", err)
	}
	// Another project's waitpoint is none to read, and none to write.
	if _, err := ws.Waitpoint(ctx, "prj_b", runID, "ok"); !automation.IsNotFound(err) {
		t.Fatalf("another project's read = %v, want not found", err)
	}
	_, err = ws.UpdateWaitpoint(ctx, "prj_b", runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status = automation.WaitpointDecided
		return true, nil
	})
	if !automation.IsNotFound(err) {
		t.Fatalf("another project's write = %v, want not found", err)
	}
	if got, _ := ws.Waitpoint(ctx, "prj_a", runID, "ok"); got.Status != automation.WaitpointPending {
		t.Fatalf("another project's write changed the waitpoint: %+v", got)
	}
}

func testWaitpointToken(t *testing.T, ws automation.WaitpointStore) {
	ctx := context.Background()
	runID := automation.NewID(automation.PrefixRun)
	_, first := openWaitpoint(t, ws, "prj_a", runID, "ok", automation.WaitCallback, now())
	// A new attempt asks again: a new token, the old one void.
	_, second := automation.NewWaitpointToken()
	if _, err := ws.UpdateWaitpoint(ctx, "prj_a", runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		if !found {
			return false, errors.New("not found")
		}
		w.TokenHash, w.Attempt = second, 2
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.WaitpointByToken(ctx, first); !automation.IsNotFound(err) {
		t.Fatalf("replaced token = %v, want not found", err)
	}
	if w, err := ws.WaitpointByToken(ctx, second); err != nil || w.Attempt != 2 {
		t.Fatalf("new token = %+v, %v", w, err)
	}
	// A token another waitpoint holds is refused, and nothing is written.
	other := automation.NewID(automation.PrefixRun)
	_, err := ws.UpdateWaitpoint(ctx, "prj_a", other, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Kind: automation.WaitCallback, Status: automation.WaitpointPending, Created: now(),
			ExpiresAt: now().Add(time.Hour), TokenHash: second}
		return false, nil
	})
	if !errors.Is(err, automation.ErrConflict) {
		t.Fatalf("a held token = %v, want ErrConflict", err)
	}
	if _, err := ws.Waitpoint(ctx, "prj_a", other, "ok"); !automation.IsNotFound(err) {
		t.Fatalf("the refused waitpoint = %v, want none written", err)
	}
	// A timeout voids the token: the link leads nowhere.
	w, err := ws.UpdateWaitpoint(ctx, "prj_a", runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status, w.Decision, w.TokenHash = automation.WaitpointDecided, automation.DecisionTimeout, ""
		return true, nil
	})
	if err != nil || w.TokenHash != "" || w.Status != automation.WaitpointDecided {
		t.Fatalf("timeout = %+v, %v", w, err)
	}
	if _, err := ws.WaitpointByToken(ctx, second); !automation.IsNotFound(err) {
		t.Fatalf("voided token = %v, want not found", err)
	}
	if got, err := ws.Waitpoint(ctx, "prj_a", runID, "ok"); err != nil || got.Decision != automation.DecisionTimeout || got.TokenHash != "" {
		t.Fatalf("timed out waitpoint = %+v, %v", got, err)
	}
}

func testWaitpointChangeError(t *testing.T, ws automation.WaitpointStore) {
	ctx := context.Background()
	runID := automation.NewID(automation.PrefixRun)
	openWaitpoint(t, ws, "prj_a", runID, "ok", automation.WaitApproval, now())
	boom := errors.New("boom")
	_, err := ws.UpdateWaitpoint(ctx, "prj_a", runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status = automation.WaitpointDecided
		return true, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("change error = %v, want it returned as is", err)
	}
	if got, _ := ws.Waitpoint(ctx, "prj_a", runID, "ok"); got.Status != automation.WaitpointPending {
		t.Fatalf("a failed change wrote %+v", got)
	}
}

// decide is the domain's rule in small: the first deciding answer wins,
// later ones learn the decision.
func decide(ws automation.WaitpointStore, project, runID, step, by, verdict string) (automation.Waitpoint, error) {
	return ws.UpdateWaitpoint(context.Background(), project, runID, step, func(w *automation.Waitpoint, found bool) (bool, error) {
		if !found {
			return false, automation.NotFound("approval", runID)
		}
		if w.Decided() {
			return false, automation.Conflict("ALREADY_DECIDED", "%s", w.Decision)
		}
		w.Decisions = append(w.Decisions, automation.Decision{By: by, Via: automation.ViaAPI, Decision: verdict, At: now()})
		w.Status, w.Decision = automation.WaitpointDecided, verdict
		return true, nil
	})
}

func testWaitpointFirstWins(t *testing.T, ws automation.WaitpointStore) {
	const runs, answers = 5, 6
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = automation.NewID(automation.PrefixRun)
		openWaitpoint(t, ws, "prj_a", ids[i], "ok", automation.WaitApproval, now())
	}
	type result struct {
		w   automation.Waitpoint
		err error
	}
	results := make([][]result, runs)
	var wg sync.WaitGroup
	for i, id := range ids {
		results[i] = make([]result, answers)
		for j := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				verdict := []string{automation.DecisionApproved, automation.DecisionRejected}[j%2]
				w, err := decide(ws, "prj_a", id, "ok", fmt.Sprintf("key:%d", j), verdict)
				results[i][j] = result{w, err}
			}()
		}
	}
	wg.Wait()
	for i, id := range ids {
		stored, err := ws.Waitpoint(context.Background(), "prj_a", id, "ok")
		if err != nil {
			t.Fatal(err)
		}
		wins := 0
		for _, r := range results[i] {
			switch {
			case r.err == nil:
				wins++
				if r.w.Decision != stored.Decision {
					t.Errorf("run %s: the winner decided %q, the store holds %q", id, r.w.Decision, stored.Decision)
				}
			case errors.Is(r.err, automation.ErrConflict):
			default:
				t.Errorf("run %s: an answer failed: %v", id, r.err)
			}
		}
		if wins != 1 || len(stored.Decisions) != 1 || !stored.Decided() {
			t.Errorf("run %s: %d winners, stored %+v; want exactly one decision", id, wins, stored)
		}
	}
}

// testWaitpointNoLostAnswer: answers that do not decide (approvals > 1)
// all stay, however many come at once: a write that lost its race reads
// again instead of overwriting.
func testWaitpointNoLostAnswer(t *testing.T, ws automation.WaitpointStore) {
	const deciders = 6
	runID := automation.NewID(automation.PrefixRun)
	openWaitpoint(t, ws, "prj_a", runID, "ok", automation.WaitApproval, now())
	var wg sync.WaitGroup
	errs := make([]error, deciders)
	for j := range deciders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[j] = ws.UpdateWaitpoint(context.Background(), "prj_a", runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
				w.Decisions = append(w.Decisions, automation.Decision{By: fmt.Sprintf("key:%d", j), Via: automation.ViaAPI,
					Decision: automation.DecisionApproved, At: now()})
				return false, nil
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := ws.Waitpoint(context.Background(), "prj_a", runID, "ok")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range got.Decisions {
		seen[d.By] = true
	}
	if len(got.Decisions) != deciders || len(seen) != deciders {
		t.Fatalf("decisions = %+v, want %d distinct", got.Decisions, deciders)
	}
}

func testWaitpointInbox(t *testing.T, ws automation.WaitpointStore) {
	ctx := context.Background()
	base := now().Add(-time.Hour)
	var pending []string
	for i := range 5 {
		id := automation.NewID(automation.PrefixRun)
		openWaitpoint(t, ws, "prj_a", id, "ok", automation.WaitApproval, base.Add(time.Duration(i)*time.Second))
		pending = append(pending, id)
	}
	// Callbacks and other projects' approvals are not in the inbox.
	openWaitpoint(t, ws, "prj_a", automation.NewID(automation.PrefixRun), "cb", automation.WaitCallback, base.Add(10*time.Second))
	openWaitpoint(t, ws, "prj_b", automation.NewID(automation.PrefixRun), "ok", automation.WaitApproval, base.Add(11*time.Second))
	if _, err := decide(ws, "prj_a", pending[1], "ok", "key:1", automation.DecisionApproved); err != nil {
		t.Fatal(err)
	}
	list := func(status string, limit int) []string {
		t.Helper()
		var ids []string
		q := automation.ListQuery{Limit: limit, Status: status}
		for range 10 {
			page, err := ws.ListWaitpoints(ctx, "prj_a", q)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range page.Items {
				if w.Kind != automation.WaitApproval || w.Status != status || w.Project != "prj_a" {
					t.Fatalf("%s list holds %+v", status, w)
				}
				ids = append(ids, w.RunID)
			}
			if page.Next == "" {
				return ids
			}
			q.After = page.Next
		}
		t.Fatal("the list did not end")
		return nil
	}
	want := []string{pending[4], pending[3], pending[2], pending[0]}
	if got := list(automation.WaitpointPending, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PENDING in pages of 2 = %v, want newest first %v", got, want)
	}
	if got := list(automation.WaitpointDecided, 10); fmt.Sprint(got) != fmt.Sprint([]string{pending[1]}) {
		t.Fatalf("DECIDED = %v, want %v", got, pending[1])
	}
}
