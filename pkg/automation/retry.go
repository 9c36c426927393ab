package automation

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
)

// Where a retry starts.
const (
	RetryFromStart      = "START"       // a new run with the same (or an edited) trigger
	RetryFromFailedStep = "FAILED_STEP" // a new run resuming at the failed step
)

// RetryRequest is the optional body of POST …/runs/{runId}/retry.
type RetryRequest struct {
	From    string        `json:"from,omitempty"` // RetryFromStart (default) or RetryFromFailedStep
	Trigger *RetryTrigger `json:"trigger,omitempty"`
}

// RetryTrigger edits the trigger of a retry from START.
type RetryTrigger struct {
	Body json.RawMessage `json:"body"`
}

// RetryRun starts a new run of the flow from an earlier one, whatever the
// flow's status: a retry is a deliberate act. From START it runs with the
// earlier run's trigger data, or with req.Trigger's body instead; from
// FAILED_STEP it resumes the earlier FAILED or TIMEOUT run: the new run
// carries the results of the steps that succeeded (their outputs stand,
// steps with side effects are not executed again) and starts at the step
// that failed, and ResumedFrom names the earlier run. A retry is never
// deduplicated by the flow's idempotency header.
func (s *RunService) RetryRun(ctx context.Context, p Project, flowID, runID string, req RetryRequest) (Run, error) {
	from := req.From
	if from == "" {
		from = RetryFromStart
	}
	if from != RetryFromStart && from != RetryFromFailedStep {
		return Run{}, Invalid("from must be %s or %s, got %q", RetryFromStart, RetryFromFailedStep, req.From)
	}
	if req.Trigger != nil && from != RetryFromStart {
		return Run{}, Invalid("trigger can only be given with from %s: a retry from the failed step keeps the run's trigger", RetryFromStart)
	}
	if req.Trigger != nil && (len(req.Trigger.Body) == 0 || !json.Valid(req.Trigger.Body)) {
		return Run{}, Invalid(`trigger.body is required with trigger and must be JSON, e.g. {"trigger": {"body": {"ref": "main"}}}`)
	}
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	old, err := rt.Runs.Run(ctx, p.ID, flowID, runID) // with its DraftDefinition
	if err != nil {
		return Run{}, wrap("get run", err)
	}
	f, err := s.store.Flow(ctx, p.ID, flowID)
	if err != nil {
		return Run{}, wrap("retry run", err)
	}
	td := old.Trigger
	if req.Trigger != nil {
		td.Body, td.RawBody = req.Trigger.Body, ""
	}
	var steps []StepResult
	resumed := ""
	if from == RetryFromFailedStep {
		failed := slices.IndexFunc(old.Steps, func(st StepResult) bool { return st.Status == StepFailed })
		if (old.Status != RunFailed && old.Status != RunTimeout) || failed < 0 {
			return Run{}, Conflict("RUN_NOT_FAILED", "run %s is %s without a failed step: retry it from %s", old.ID, old.Status, RetryFromStart)
		}
		steps, resumed = withoutItemsJournals(old.Steps[:failed]), old.ID
		if err := s.versionKept(ctx, f, old); err != nil {
			return Run{}, err
		}
	}
	retryOf := ""
	if from == RetryFromStart {
		retryOf = old.ID
	}
	r, err := s.enqueueNew(ctx, f, td, func(r *Run) {
		r.Steps, r.ResumedFrom, r.RetryOf = append(r.Steps, steps...), resumed, retryOf
		if from == RetryFromFailedStep {
			// It resumes the run: on the definition that run executed
			// (versions.go), whatever was published since.
			r.FlowVersion, r.Draft, r.DraftDefinition = old.FlowVersion, old.Draft, old.DraftDefinition
		}
	})
	return r.Public(), err
}

// enqueueNew queues a new run of f with a fresh ID, shaped by prepare.
func (s *RunService) enqueueNew(ctx context.Context, f Flow, td TriggerData, prepare func(*Run)) (Run, error) {
	r := s.newRun(f, td)
	prepare(&r)
	return s.launch(ctx, r, false)
}

// MaxReplay bounds one replay call.
const MaxReplay = 1000

// ReplayRequest is the body of POST /api/v1/runs/replay.
type ReplayRequest struct {
	FlowID string `json:"flowId,omitempty"`
	Status string `json:"status"` // FAILED or TIMEOUT
	Since  string `json:"since,omitempty"`
	Until  string `json:"until,omitempty"`
	// ReplayToken, when given, makes the replay safe to send again: a
	// retry with the same token makes none of the runs the first made
	// (replaytoken.go).
	ReplayToken string `json:"replayToken,omitempty"`
}

// Replayed is the answer of a replay.
type Replayed struct {
	Replayed int `json:"replayed"`
}

// ReplayRuns retries from START every FAILED (or TIMEOUT) run of the
// project, or of one flow, created in the window, newest first, at most
// MaxReplay per call.
func (s *RunService) ReplayRuns(ctx context.Context, p Project, req ReplayRequest) (Replayed, error) {
	if req.Status != string(RunFailed) && req.Status != string(RunTimeout) {
		return Replayed{}, Invalid("status must be %s or %s, got %q", RunFailed, RunTimeout, req.Status)
	}
	if err := checkReplayToken(req.ReplayToken); err != nil {
		return Replayed{}, err
	}
	rt, err := s.runtime()
	if err != nil {
		return Replayed{}, err
	}
	q, _, err := s.runQuery(p, RunSearch{PageRequest: PageRequest{Status: req.Status}, FlowID: req.FlowID, Since: req.Since, Until: req.Until})
	if err != nil {
		return Replayed{}, err
	}
	if req.FlowID != "" {
		if _, err := s.store.Flow(ctx, p.ID, req.FlowID); err != nil {
			return Replayed{}, wrap("replay runs", err)
		}
	}
	// Collect first: the new runs must not be read back as matches.
	var olds []Run
	q.ListQuery = ListQuery{Limit: MaxPageSize, Status: req.Status}
	for len(olds) < MaxReplay {
		page, err := rt.Runs.SearchRuns(ctx, p.ID, q)
		if err != nil {
			return Replayed{}, wrap("replay runs", err)
		}
		olds = append(olds, page.Items...)
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	olds = olds[:min(len(olds), MaxReplay)]
	inWindow := make(map[string]bool, len(olds))
	for _, old := range olds {
		inWindow[old.ID] = true
	}
	flows := map[string]Flow{}
	n := 0
	for _, old := range olds {
		if req.ReplayToken != "" && madeByReplay(req.ReplayToken, old.ID) {
			continue
		}
		f, ok := flows[old.FlowID]
		if !ok {
			if f, err = s.store.Flow(ctx, p.ID, old.FlowID); IsNotFound(err) {
				continue
			} else if err != nil {
				return Replayed{Replayed: n}, wrap("replay runs", err)
			}
			flows[old.FlowID] = f
		}
		full, err := rt.Runs.Run(ctx, p.ID, old.FlowID, old.ID) // the summary lacks the body
		if IsNotFound(err) {
			continue
		} else if err != nil {
			return Replayed{Replayed: n}, wrap("replay runs", err)
		}
		// A retry or replay of a run this replay starts again would make
		// every replay of a window double it.
		if origin := cmp.Or(full.RetryOf, full.ResumedFrom); origin != "" && inWindow[origin] {
			continue
		}
		prepare := func(r *Run) { r.RetryOf = old.ID }
		if req.ReplayToken != "" {
			id := replayRunID(req.ReplayToken, old)
			prepare = func(r *Run) { r.ID, r.RetryOf = id, old.ID }
		}
		if _, err := s.enqueueNew(ctx, f, full.Trigger, prepare); err != nil && !(req.ReplayToken != "" && isRunExists(err)) {
			return Replayed{Replayed: n}, err
		}
		// A run that exists already was made by an earlier try of this
		// replay: it counts as replayed, once.
		n++
	}
	return Replayed{Replayed: n}, nil
}

// versionKept refuses to resume old on a version that a publish past the
// plan's versionsPerFlow has pruned since (versions.go): the new run
// could not find the definition it resumes.
func (s *RunService) versionKept(ctx context.Context, f Flow, old Run) error {
	v := old.FlowVersion
	if v == nil || old.Draft || *v == f.live() {
		return nil
	}
	// Through the cache of pinned versions: the attempt that executes
	// the new run reads it from there.
	_, err := s.flows.versionDefinition(ctx, f, *v)
	if IsNotFound(err) {
		return Conflict("VERSION_PRUNED", "run %s executed version %d of the flow, which is no longer kept (limits.versionsPerFlow): retry it from %s, on the live version", old.ID, *v, RetryFromStart)
	}
	return err
}
