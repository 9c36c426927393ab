package dashboard

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"flowservice/pkg/automation"
)

// TestProblemStatus: the dashboard answers the API's status for each kind
// of the Service's errors (one table for both), a rate limit included.
func TestProblemStatus(t *testing.T) {
	d := &Dashboard{log: slog.New(slog.DiscardHandler)}
	r := httptest.NewRequest(http.MethodPost, "/ui/flows", nil)
	for _, c := range []struct {
		err  error
		want int
	}{
		{&automation.Error{Kind: automation.ErrRateLimited, Code: "RATE_LIMITED", Message: "slow down"}, http.StatusTooManyRequests},
		{&automation.Error{Kind: automation.ErrLoop, Code: "LOOP", Message: "loop"}, http.StatusLoopDetected},
		{automation.NotFound("flow", "f1"), http.StatusNotFound},
		{automation.Invalid("bad"), http.StatusBadRequest},
	} {
		if got, _ := d.problem(r, c.err); got != c.want {
			t.Errorf("%v: status %d, want %d", c.err, got, c.want)
		}
	}
}
