package automation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flowservice/pkg/flowdef"
	"fmt"
	"strings"
	"time"
)

// Bounds of POLL triggers. Each poll is one request (or the pages of a
// paginated one) and considers at most MaxPollItems items; the keys of the
// latest MaxSeenKeys items are kept per flow, as 12-byte hashes (120 KB).
const (
	MaxSeenKeys  = 10_000
	MaxPollItems = 1_000
	// seenHashBytes is the size of one kept key: a truncated SHA-256, so
	// that keys of any length cost the same and two differ by chance once
	// in 2^96.
	seenHashBytes = 12
)

// step, connection included.
func (s *flowValidator) validatePoll(ctx context.Context, f *Flow) error {
	t := &f.Trigger
	if t.Webhook != nil || t.Schedule != nil {
		return Invalid("trigger: a POLL trigger takes poll only, not webhook or schedule")
	}
	p := t.Poll
	if p == nil {
		return Invalid(`trigger.poll is required for POLL triggers, e.g. {"every": "5m", "request": {"url": "https://api.example.com/items"}, "items": "response.body.items", "key": "item.id"}`)
	}
	every, err := p.Interval()
	if err != nil {
		return Invalid("trigger.poll.%v", err)
	}
	if s.polls != nil {
		if err := s.polls.PollEvery(every); err != nil {
			return err
		}
	}
	req := Step(p.Request)
	if req.Name != "" || req.Type != "" || req.When != "" {
		return Invalid("trigger.poll.request takes the fields of an HTTP step (url, method, headers, query, body, connectionId...), without name, type or when")
	}
	if req.ContinueOnFail || req.Retry != nil {
		return Invalid("trigger.poll.request takes neither continueOnFail nor retry: a failed poll is shown on the flow (poll.lastError) and the next poll is its retry")
	}
	req.Name, req.Type = "request", StepHTTP
	if err := flowdef.OnlyFields(&req, "trigger.poll.request"); err != nil {
		return fromDef(err)
	}
	if strings.TrimSpace(req.URL) == "" {
		return Invalid("trigger.poll.request.url is required")
	}
	if err := fromDef(flowdef.CheckHTTP(s.checker, &req, "trigger.poll.request")); err != nil {
		return err
	}
	if err := s.connectionRef(ctx, f, &req, "trigger.poll.request"); err != nil {
		return err
	}
	req.Name, req.Type = "", ""
	p.Request = PollRequest(req)
	if strings.TrimSpace(p.Items) == "" {
		return Invalid(`trigger.poll.items is required: an expression over response giving the list, e.g. "response.body.items"`)
	}
	if err := s.checker.ResponseExpression(p.Items); err != nil {
		return Invalid("trigger.poll.items: %v", err)
	}
	if strings.TrimSpace(p.Key) == "" {
		return Invalid(`trigger.poll.key is required: an expression over item that names it, e.g. "item.id"`)
	}
	if err := s.checker.Expression(p.Key); err != nil {
		return Invalid("trigger.poll.key: %v", err)
	}
	return nil
}

// PollChecker is a Checker that also bounds POLL intervals, as the AWS
// backend must (its scheduler keeps whole minutes): an interval it cannot
// keep is a 400 when the flow is saved.
type PollChecker interface {
	PollEvery(every time.Duration) error
}

// PollDelayer queues a poll of a flow due at a later time (SQS: a delayed
// "poll" message), for intervals finer than the scheduler's: EventBridge
// Scheduler fires at most once a minute, so the firing of a POLL flow whose
// interval is under a minute queues the polls due within that minute.
type PollDelayer interface {
	EnqueuePollAfter(ctx context.Context, project, flowID string, at time.Time) error
}

// pollsWithinMinute queues, through the runtime's PollDelayer when it has
// one, the polls of a sub-minute POLL flow due in the minute after
// a firing: at every, 2×every… before the next firing.
func (s *RunService) pollsWithinMinute(ctx context.Context, project, flowID string) error {
	d := s.rt.PollDelayer
	if d == nil {
		return nil
	}
	f, err := s.store.Flow(ctx, project, flowID)
	if err != nil || f.Status != FlowActive || f.Trigger.Type != TriggerPoll || f.Trigger.Poll == nil {
		return nil // gone or changed since: nothing more to poll
	}
	every, err := f.Trigger.Poll.Interval()
	if err != nil || every >= time.Minute {
		return nil
	}
	now := s.clock()
	for at := now.Add(every); at.Before(now.Add(time.Minute)); at = at.Add(every) {
		if err := d.EnqueuePollAfter(ctx, project, flowID, at); err != nil {
			return wrap("queue a poll", err)
		}
	}
	return nil
}

// PolledItem is one item a poll found, with its key.
type PolledItem struct {
	Key  string
	Item json.RawMessage
}

// Poller makes the request of a POLL trigger (the engine): the items it
// found with their keys, at most MaxPollItems, or an error to show on the
// flow.
type Poller interface {
	Poll(ctx context.Context, f Flow) ([]PolledItem, error)
}

// PollState is what a POLL flow's polls keep between them.
type PollState struct {
	// Primed is set by the first poll after the flow was enabled, which
	// only records the items that exist.
	Primed       bool       `json:"primed"`
	LastPolledAt *time.Time `json:"lastPolledAt,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	LastErrorAt  *time.Time `json:"lastErrorAt,omitempty"`
	// LastRuns is how many runs the last successful poll started.
	LastRuns int `json:"lastRuns"`
	// Polled names what the recorded keys came from (pollSource): a poll
	// whose request, items or key changed since records again before it
	// starts runs, as after enabling.
	Polled string `json:"polled,omitempty"`
	// Seen holds the hashes of the latest keys, oldest first.
	Seen []byte `json:"seen,omitempty"`
}

// PollStore keeps each POLL flow's PollState.
type PollStore interface {
	// PollState returns the flow's poll state: the zero PollState (not an
	// error) when it has none.
	PollState(ctx context.Context, project, flowID string) (PollState, error)
	// UpdatePollState replaces the flow's poll state with what change
	// returns for the current one, atomically (a concurrent update makes
	// change run again on the newer state). An error from change is
	// returned as is; a flow missing from the project is ErrNotFound.
	UpdatePollState(ctx context.Context, project, flowID string, change func(PollState) (PollState, error)) error
}

// PollStatus is a POLL flow's polling as the flow object shows it.
type PollStatus struct {
	Primed       bool       `json:"primed"`
	LastPolledAt *time.Time `json:"lastPolledAt"`
	LastError    *string    `json:"lastError"`
	LastErrorAt  *time.Time `json:"lastErrorAt"`
	LastRuns     int        `json:"lastRuns"`
	SeenKeys     int        `json:"seenKeys"`
}

func (st PollState) status() *PollStatus {
	ps := &PollStatus{Primed: st.Primed, LastPolledAt: st.LastPolledAt, LastErrorAt: st.LastErrorAt,
		LastRuns: st.LastRuns, SeenKeys: len(st.Seen) / seenHashBytes}
	if st.LastError != "" {
		e := st.LastError
		ps.LastError = &e
	}
	return ps
}

// polls is the backend's PollStore; a backend without one polls nothing.
func (s *FlowService) polls() (PollStore, bool) {
	return s.pollStore, s.pollStore != nil
}

// withPollStatus adds the polling status to a POLL flow.
func (s *FlowService) withPollStatus(ctx context.Context, f Flow) (Flow, error) {
	ps, ok := s.polls()
	if f.Trigger.Type != TriggerPoll || !ok {
		return f, nil
	}
	st, err := ps.PollState(ctx, f.Project, f.ID)
	if err != nil {
		return Flow{}, wrap("read poll state", err)
	}
	f.Poll = st.status()
	f.Poll.Primed = st.Primed && st.Polled == pollSource(f.Trigger.Poll)
	return f, nil
}

// unprimePoll makes the next poll of a flow just enabled record what exists
// without starting runs.
func (s *FlowService) unprimePoll(ctx context.Context, f Flow) error {
	ps, ok := s.polls()
	if f.Trigger.Type != TriggerPoll || !ok {
		return nil
	}
	err := ps.UpdatePollState(ctx, f.Project, f.ID, func(st PollState) (PollState, error) {
		st.Primed = false
		return st, nil
	})
	return wrap("reset poll state", err)
}

// PollFlow makes one poll of an ACTIVE POLL flow: it sends the request,
// starts a run for each item whose key it has not seen (none on the first
// poll after enabling, which only records them), and records the keys and
// the outcome on the flow. A failed request is recorded as the flow's
// lastError and is not an error here: the next poll is the retry. Runs are
// queued before their keys are recorded, and their IDs derive from the
// keys, so a poll cut short between the two starts no run twice.
func (s *RunService) PollFlow(ctx context.Context, project, flowID string) error {
	if _, err := s.runtime(); err != nil {
		return err
	}
	ps, ok := s.flows.polls()
	if !ok {
		return errors.New("automation: polling is not configured (the store keeps no poll state)")
	}
	poller := s.exec
	f, err := s.store.Flow(ctx, project, flowID)
	if err != nil {
		return wrap("poll", err)
	}
	if f.Status != FlowActive || f.Trigger.Type != TriggerPoll || f.Trigger.Poll == nil {
		return FlowNotScheduled(flowID)
	}
	st, err := ps.PollState(ctx, project, flowID)
	if err != nil {
		return wrap("poll: read state", err)
	}
	items, perr := poller.Poll(ctx, f)
	now := s.clock()
	if perr != nil {
		return wrap("poll: record error", ps.UpdatePollState(ctx, project, flowID, func(st PollState) (PollState, error) {
			msg := perr.Error()
			if len(msg) > 2048 {
				msg = strings.ToValidUTF8(msg[:2048], "") + "…"
			}
			st.LastPolledAt, st.LastError, st.LastErrorAt = &now, msg, &now
			return st, nil
		}))
	}
	fresh := unseen(st.Seen, items)
	started := 0
	source := pollSource(f.Trigger.Poll)
	if st.Primed && st.Polled == source {
		for i, it := range fresh {
			r := Run{
				ID: derivedRunID(flowID, "poll\x00"+it.Key), Project: project, FlowID: flowID, Status: RunRunning,
				Trigger: TriggerData{Method: "POLL", Headers: map[string]string{}, Query: map[string]string{}, Body: it.Item},
				Steps:   []StepResult{}, Created: s.clock(),
			}
			_, err := s.launch(ctx, r, false)
			if isNotAdmitted(err) {
				// Past the runsPerMinute quota: the items not started are
				// not recorded as seen, so a later poll starts them.
				s.log.WarnContext(ctx, "poll: runs over the runsPerMinute quota wait for a later poll", "flow", flowID, "items", len(fresh)-i, "err", err)
				fresh = fresh[:i]
				break
			}
			if err != nil && !IsRunExists(err) {
				return wrap("poll: enqueue run", err)
			}
			if err == nil {
				started++
			}
		}
	}
	err = ps.UpdatePollState(ctx, project, flowID, func(cur PollState) (PollState, error) {
		cur.Primed, cur.LastPolledAt, cur.LastError, cur.LastErrorAt, cur.LastRuns = true, &now, "", nil, started
		cur.Polled = source
		// Against the state as it is now: a poll that overlapped this one
		// may have recorded some of the keys.
		cur.Seen = remember(cur.Seen, unseen(cur.Seen, fresh))
		return cur, nil
	})
	return wrap("poll: record keys", err)
}

// pollSource names what a poll reads (its request, items and key, not its
// interval): keys recorded from another source are not this one's.
func pollSource(p *Poll) string {
	b, _ := json.Marshal(struct {
		Request    PollRequest
		Items, Key string
	}{p.Request, p.Items, p.Key})
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:8])
}

// seenHash is what is kept of a key.
func seenHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return string(sum[:seenHashBytes])
}

// unseen returns the items whose keys are not in seen, each key once, in
// the order given.
func unseen(seen []byte, items []PolledItem) []PolledItem {
	known := make(map[string]bool, len(seen)/seenHashBytes+len(items))
	for i := 0; i+seenHashBytes <= len(seen); i += seenHashBytes {
		known[string(seen[i:i+seenHashBytes])] = true
	}
	var out []PolledItem
	for _, it := range items {
		h := seenHash(it.Key)
		if !known[h] {
			known[h] = true
			out = append(out, it)
		}
	}
	return out
}

// remember appends the keys of items to seen and keeps the latest
// MaxSeenKeys.
func remember(seen []byte, items []PolledItem) []byte {
	for _, it := range items {
		seen = append(seen, seenHash(it.Key)...)
	}
	if n := len(seen) - MaxSeenKeys*seenHashBytes; n > 0 {
		seen = append([]byte(nil), seen[n:]...)
	}
	return seen
}
