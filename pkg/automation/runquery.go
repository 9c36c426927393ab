package automation

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Reading runs (RunService): a flow's run history, one run, the project's
// run search (GET /api/v1/runs, which a replay selects with too), and the
// purge of runs past their retention.

// ListRuns returns one page of a flow's run history, newest first.
func (s *RunService) ListRuns(ctx context.Context, p Project, flowID string, pr PageRequest) (List[Run], error) {
	rt, q, scope, err := s.runListQuery(ctx, p, flowID, pr)
	if err != nil {
		return List[Run]{}, err
	}
	page, err := rt.Runs.ListRuns(ctx, p.ID, flowID, q)
	if err != nil {
		return List[Run]{}, wrap("list runs", err)
	}
	return list(s, scope, q, page, Run.Public), nil
}

// ListRunsJSON is ListRuns with each run as its JSON (RunStore.ListRunsJSON),
// for the API, which writes the page from it.
func (s *RunService) ListRunsJSON(ctx context.Context, p Project, flowID string, pr PageRequest) (List[json.RawMessage], error) {
	rt, q, scope, err := s.runListQuery(ctx, p, flowID, pr)
	if err != nil {
		return List[json.RawMessage]{}, err
	}
	page, err := rt.Runs.ListRunsJSON(ctx, p.ID, flowID, q)
	if err != nil {
		return List[json.RawMessage]{}, wrap("list runs", err)
	}
	return list(s, scope, q, page, func(r json.RawMessage) json.RawMessage { return r }), nil
}

// runListQuery checks a request for a page of a flow's runs.
func (s *RunService) runListQuery(ctx context.Context, p Project, flowID string, pr PageRequest) (*RunRuntime, ListQuery, string, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, ListQuery{}, "", err
	}
	statuses := []string{string(RunRunning), string(RunSucceeded), string(RunFailed), string(RunTimeout)}
	if pr.Status != "" && !slices.Contains(statuses, pr.Status) {
		return nil, ListQuery{}, "", InvalidCode("INVALID_PARAMETER", "status must be one of %v, got %q", statuses, pr.Status)
	}
	if _, err := s.store.Flow(ctx, p.ID, flowID); err != nil {
		return nil, ListQuery{}, "", wrap("list runs", err)
	}
	scope := p.ID + "/runs/" + flowID
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return nil, ListQuery{}, "", err
	}
	return rt, q, scope, nil
}

// Run returns one run of a flow with its step results.
func (s *RunService) Run(ctx context.Context, p Project, flowID, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	r, err := rt.Runs.Run(ctx, p.ID, flowID, runID)
	return r.Public(), wrap("get run", err)
}

// PurgeRuns deletes runs older than the retention period, in batches, and
// returns how many it deleted.
func (s *RunService) PurgeRuns(ctx context.Context) (int, error) {
	rt, err := s.runtime()
	if err != nil {
		return 0, err
	}
	before := s.clock().Add(-rt.Policy.WithDefaults().Retention)
	total := 0
	for {
		n, err := rt.Runs.DeleteRunsBefore(ctx, before, 500)
		total += n
		if err != nil {
			return total, wrap("purge runs", err)
		}
		if n < 500 {
			return total, nil
		}
	}
}

// RunSearch is what GET /api/v1/runs asks, unparsed.
type RunSearch struct {
	PageRequest
	FlowID       string
	Since, Until string // RFC 3339, optional
}

// runStatuses are the values a status filter takes.
var runStatuses = []string{string(RunRunning), string(RunSucceeded), string(RunFailed), string(RunTimeout)}

// runQuery checks a search.
func (s *RunService) runQuery(p Project, in RunSearch) (RunQuery, string, error) {
	if in.Status != "" && !slices.Contains(runStatuses, in.Status) {
		return RunQuery{}, "", InvalidCode("INVALID_PARAMETER", "status must be one of %v, got %q", runStatuses, in.Status)
	}
	q := RunQuery{FlowID: in.FlowID}
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", in.Since, &q.Since}, {"until", in.Until, &q.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			return RunQuery{}, "", InvalidCode("INVALID_PARAMETER", "%s must be an RFC 3339 time such as 2026-05-01T00:00:00Z, got %q", t.name, t.v)
		}
		*t.dst = v.UTC()
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return RunQuery{}, "", InvalidCode("INVALID_PARAMETER", "since must be before until")
	}
	scope := p.ID + "/runs?" + in.FlowID + "\x00" + in.Since + "\x00" + in.Until
	return q, scope, nil
}

// SearchRuns lists a project's runs, newest first, filtered by flow,
// status and creation time: run summaries, as a flow's run list.
func (s *RunService) SearchRuns(ctx context.Context, p Project, in RunSearch) (List[Run], error) {
	rt, q, scope, err := s.searchQuery(p, in)
	if err != nil {
		return List[Run]{}, err
	}
	page, err := rt.Runs.SearchRuns(ctx, p.ID, q)
	if err != nil {
		return List[Run]{}, wrap("search runs", err)
	}
	return list(s, scope, q.ListQuery, page, Run.Public), nil
}

// SearchRunsJSON is SearchRuns with each run as its JSON
// (RunStore.SearchRunsJSON), for the API, which writes the page from it.
func (s *RunService) SearchRunsJSON(ctx context.Context, p Project, in RunSearch) (List[json.RawMessage], error) {
	rt, q, scope, err := s.searchQuery(p, in)
	if err != nil {
		return List[json.RawMessage]{}, err
	}
	page, err := rt.Runs.SearchRunsJSON(ctx, p.ID, q)
	if err != nil {
		return List[json.RawMessage]{}, wrap("search runs", err)
	}
	return list(s, scope, q.ListQuery, page, func(r json.RawMessage) json.RawMessage { return r }), nil
}

// searchQuery checks a search and its page request.
func (s *RunService) searchQuery(p Project, in RunSearch) (*RunRuntime, RunQuery, string, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, RunQuery{}, "", err
	}
	q, scope, err := s.runQuery(p, in)
	if err != nil {
		return nil, RunQuery{}, "", err
	}
	if q.ListQuery, err = s.listQuery(scope, in.PageRequest); err != nil {
		return nil, RunQuery{}, "", err
	}
	return rt, q, scope, nil
}
