package runworker

import (
	"context"

	"flowservice/pkg/automation"
)

// Waker is the RunRuntime's automation.Waker on flowd: the embedded store
// made a run that waits for a child due in the write that finished the
// child, and this tells idle workers, so that one takes it at once
// instead of at the next poll.
func (p *Pool) Waker() automation.Waker { return poolWaker{p} }

type poolWaker struct{ p *Pool }

func (w poolWaker) WakeRun(context.Context, string, string) error {
	w.p.Notify()
	return nil
}
