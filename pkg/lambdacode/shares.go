package lambdacode

import (
	"context"
	"fmt"

	"flowservice/pkg/automation"
	"flowservice/pkg/fairshare"
)

// DefaultInstanceSlots is how many code invocations one runner (or
// workflow receiver) instance has in flight at once: the code function's
// reserved concurrency (CodeReservedConcurrency, 50) over the runner's
// most instances (RunnerMaxConcurrency, 10). Within an instance they are
// shared fairly by project (fairshare: one project holds at most 4 of
// the 5), so across the fleet one project's scripts hold at most 4/5 of
// the code function's concurrency and another project's script always
// finds room, instead of being throttled behind a flood
// (docs/reliability.md).
const DefaultInstanceSlots = 5

// WithShares makes r hold each invocation to a slot of s, taken for the
// request's project: a project over its share of s waits for one of its
// own invocations to end, and a freed slot goes to the waiting project
// that holds the fewest.
func (r *Runner) WithShares(s *fairshare.Slots) *Runner {
	r.shares = s
	return r
}

// share takes the request's slot; the returned func gives it back.
func (r *Runner) share(ctx context.Context, req automation.CodeRequest) (func(), error) {
	if r.shares == nil {
		return func() {}, nil
	}
	if err := r.shares.Acquire(ctx, req.Project); err != nil {
		return nil, fmt.Errorf("lambdacode: wait for a code slot of project %s: %w", req.Project, err)
	}
	return func() { r.shares.Release(req.Project) }, nil
}
