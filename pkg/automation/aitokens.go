package automation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The aiTokensPerDay quota and the usage of AI steps. Every model turn's
// tokens (input and output) are added to the project's count of the UTC
// day in the store (UsageStore.AddAITokens): one small atomic write per
// turn, so that every process and Lambda environment counts against the
// same figure, and runs without AI steps write nothing. Before each turn
// the AI step reads the count (AdmitAITurn) and fails with QUOTA_EXCEEDED
// once it has reached the limit: a turn that pushes the project over
// finishes (its tokens were spent at the provider already), the next one
// is refused. Concurrent AI steps of a project may each finish the turn
// they had begun, so the count can pass the limit by that much.
//
// A run's own usage (Run.Usage) is the sum of its AI steps' usage, which
// each AI step's output holds: the engine sums it into the run it hands
// back, so it rides in the run's journal, release and finish writes.

// AIMeter is what the AI step asks of the domain about tokens.
// ProjectService implements it (and so Service).
type AIMeter interface {
	// AdmitAITurn returns nil when the project may ask the model for one
	// more turn, an *Error with code QUOTA_EXCEEDED when its tokens of
	// today have reached aiTokensPerDay, or a store error.
	AdmitAITurn(ctx context.Context, project string) error
	// CountAITokens adds a turn's tokens to the project's count of today.
	CountAITokens(ctx context.Context, project string, tokens int64) error
}

var _ AIMeter = (*ProjectService)(nil)

// AIDay names the UTC day of t, as the token counts are kept:
// "2006-01-02".
func AIDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// AdmitAITurn implements AIMeter: one read of the day's count, none for a
// project without the limit.
func (s *ProjectService) AdmitAITurn(ctx context.Context, project string) error {
	now := s.clock()
	pq, err := s.quotas.get(ctx, s.store, project, now)
	if err != nil {
		return err
	}
	most := pq.limits.AITokensPerDay
	if most == nil {
		return nil
	}
	used, err := s.store.AITokens(ctx, project, AIDay(now))
	if err != nil {
		return wrap("read the project's model tokens of today", err)
	}
	if used >= *most {
		return AIQuotaExceeded(*most, used, pq.plan, now)
	}
	return nil
}

// CountAITokens implements AIMeter. Unlimited projects are counted too:
// GET /api/v1/project shows their usage.
func (s *ProjectService) CountAITokens(ctx context.Context, project string, tokens int64) error {
	if tokens <= 0 {
		return nil
	}
	if _, err := s.store.AddAITokens(ctx, project, AIDay(s.clock()), tokens); err != nil {
		return wrap("count the project's model tokens", err)
	}
	return nil
}

// AIQuotaExceeded is an AI turn refused because the project used most
// tokens today (used, at least most) on its plan.
func AIQuotaExceeded(most, used int64, plan Plan, now time.Time) *Error {
	next := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return &Error{Kind: ErrRateLimited, Code: "QUOTA_EXCEEDED", Message: fmt.Sprintf(
		"the project used %d model tokens today, its %s plan allows %d a day (limits.aiTokensPerDay); AI steps can ask the model again from %s",
		used, plan, most, next.Format(time.RFC3339))}
}

// RunUsage is the model tokens a run's AI steps used, summed.
type RunUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// StepsUsage sums the usage the AI steps among lists (at every depth)
// record in their outputs; nil when none records any, so that a run
// without AI steps keeps no usage. It decodes only AI steps' outputs.
func StepsUsage(lists ...[]StepResult) *RunUsage {
	var u RunUsage
	found := false
	var walk func([]StepResult)
	walk = func(steps []StepResult) {
		for _, st := range steps {
			if st.Type == StepAI && len(st.Output) > 0 {
				var out struct {
					Usage *RunUsage `json:"usage"`
				}
				if json.Unmarshal(st.Output, &out) == nil && out.Usage != nil {
					u.InputTokens += out.Usage.InputTokens
					u.OutputTokens += out.Usage.OutputTokens
					found = true
				}
			}
			walk(st.Steps)
			for _, it := range st.Iterations {
				walk(it.Steps)
			}
		}
	}
	for _, l := range lists {
		walk(l)
	}
	if !found {
		return nil
	}
	return &u
}
