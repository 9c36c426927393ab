package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.Poller = (*Engine)(nil)

// Poll sends the request of f's POLL trigger as an HTTP step (connection,
// variables, paginate and all) and returns the items its items expression
// gives of the answer, each with the key its key expression gives. An
// error is what the flow shows as its polling error.
func (e *Engine) Poll(ctx context.Context, f automation.Flow) ([]automation.PolledItem, error) {
	p := f.Trigger.Poll
	if p == nil {
		return nil, errors.New("the flow has no poll trigger")
	}
	req := p.Request.Step()
	pf := f
	pf.Steps, pf.OnError = []automation.Step{req}, nil
	r := automation.Run{ID: "poll", Project: f.Project, FlowID: f.ID, Status: automation.RunRunning,
		Trigger: automation.TriggerData{Method: "POLL", Headers: map[string]string{}, Query: map[string]string{}}}
	r.Steps = pending(pf.Steps)
	x := e.newExecution(ctx, pf, &r, nil, nil)
	if _, se := x.prepare(ctx); se != nil {
		return nil, errors.New(x.mask(se.msg))
	}
	x.env[budgetKey] = newBudget(ctx)
	out, err := x.http(ctx, req)
	if err != nil {
		return nil, errors.New(x.mask("request: " + err.Error()))
	}
	got, err := e.checker.evalResponse(p.Items, x.env, out)
	if err != nil {
		return nil, fmt.Errorf("items: %s", x.mask(err.Error()))
	}
	list, ok := got.([]any)
	if !ok && got != nil {
		return nil, fmt.Errorf("items must give a list, got %s", x.mask(clipTo(describeValue(got), maxQuote)))
	}
	if len(list) > automation.MaxPollItems {
		return nil, fmt.Errorf("items gave %d items; a poll takes at most %d (select fewer, e.g. with a query parameter)", len(list), automation.MaxPollItems)
	}
	items := make([]automation.PolledItem, 0, len(list))
	env := x.env
	for i, it := range list {
		env["item"], env["index"] = it, i
		k, err := e.checker.evalExpr(p.Key, env)
		if err != nil {
			return nil, fmt.Errorf("key of item %d: %s", i, x.mask(err.Error()))
		}
		key := text(k)
		if key == "" {
			return nil, fmt.Errorf("key of item %d is empty: the key must name each item, e.g. item.id", i)
		}
		b, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		items = append(items, automation.PolledItem{Key: key, Item: b})
	}
	return items, nil
}
