package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// The flow language (docs/flows.md): `when` on any step, SWITCH and FOR_EACH
// with nested steps. A scope's steps run in order through list; a FOR_EACH
// item runs in a scope of its own (fork), with `item` and `index`, and the
// outputs of the steps before the loop.

// newExecution is the top-level scope of run r.
func (e *Engine) newExecution(ctx context.Context, f automation.Flow, r *automation.Run, journal automation.Journal, previous map[string]automation.StepResult) *execution {
	x := &execution{e: e, flow: f, run: r, steps: make(map[string]any, len(f.Steps)),
		sh: &shared{results: &r.Steps, journal: journal, previous: previous}}
	x.env = map[string]any{
		"trigger": triggerEnv(r.Trigger),
		"steps":   x.steps,
		"flow":    map[string]any{"id": f.ID, "name": f.Name},
		"run":     map[string]any{"id": r.ID},
	}
	return x
}

// fork is a scope for one FOR_EACH item: the outputs so far, and item and
// index, in maps of its own (items may run at once).
func (x *execution) fork(item any, index int, iter string) *execution {
	y := *x
	y.iter = iter
	y.steps = maps.Clone(x.steps)
	y.env = maps.Clone(x.env)
	y.env["steps"] = y.steps
	y.env["item"] = item
	y.env["index"] = index
	y.logs = nil
	return &y
}

// snapshot copies the run's results as they stand, nested ones included.
func (x *execution) snapshot() []automation.StepResult {
	x.sh.mu.Lock()
	defer x.sh.mu.Unlock()
	return cloneResults(*x.sh.results)
}

func cloneResults(in []automation.StepResult) []automation.StepResult {
	if in == nil {
		return nil
	}
	out := make([]automation.StepResult, len(in))
	for i, r := range in {
		r.Steps = cloneResults(r.Steps)
		if r.Iterations != nil {
			its := make([]automation.Iteration, len(r.Iterations))
			for j, it := range r.Iterations {
				it.Steps = cloneResults(it.Steps)
				its[j] = it
			}
			r.Iterations = its
		}
		out[i] = r
	}
	return out
}

// locked runs fn holding the run's lock: every write of a result is made
// this way, so that a snapshot never sees half of one.
func (x *execution) locked(fn func()) {
	x.sh.mu.Lock()
	defer x.sh.mu.Unlock()
	fn()
}

// listEnd says how a list of steps ended. At most one of err, filtered,
// interrupted and journalErr is set; step names the step concerned.
type listEnd struct {
	step        string
	err         *stepError
	filtered    string // the FILTER that was false
	interrupted bool   // the run's context ended
	journalErr  error
	wait        *time.Time      // a WAIT step paused the run until then
	last        json.RawMessage // the last output recorded
	// waitpoint is the journal key of the APPROVAL or WAIT for a callback
	// the run waits on (with wait: its expiry), waitFor its reason.
	waitpoint string
	waitFor   automation.WaitReason
}

// halted reports whether the list stopped the whole run (anything but a
// failed step, which its container turns into its own failure).
func (l listEnd) halted() bool {
	return l.filtered != "" || l.interrupted || l.journalErr != nil || l.wait != nil
}

// list runs steps in order, recording each into results (as long as steps,
// prepared by pending). iter is the item path inside FOR_EACH ("" outside);
// top says steps are the flow's own, where the last step needs no journal
// entry (the run's end records it).
func (x *execution) list(ctx context.Context, steps []automation.Step, results []automation.StepResult, iter string, top bool) listEnd {
	var end listEnd
	for i, s := range steps {
		if ctx.Err() != nil {
			end.interrupted, end.step = true, s.Name
			return end
		}
		sr := &results[i]
		done, ok := x.sh.previous[journalKey(s.Name, iter)]
		ok = ok && done.Type == s.Type
		// A CALL_FLOW that waits for its child is looked at again, not restored.
		_, resuming := automation.WaitingCall(done)
		_, onPoint := automation.WaitingPoint(done)
		resuming = (resuming || onPoint || automation.AIContinues(done)) && ok
		if ok && finished(done) && !resuming {
			if until, ok := waitingUntil(done); ok && x.e.now().Before(until) {
				// Resumed before its time (a redelivery, a restart): wait on.
				x.locked(func() { *sr = done })
				end.wait, end.step = &until, s.Name
				return end
			}
			x.locked(func() {
				*sr = cloneResults([]automation.StepResult{done})[0]
				x.sh.spent += int64(len(done.Output))
			})
			if out := recorded(done.Output); out != nil {
				x.steps[s.Name] = out
				end.last = done.Output
			}
			x.restoreBranch(done.Steps)
			continue
		}
		began := x.e.clock()
		if resuming && done.StartedAt != nil {
			began = *done.StartedAt // a call's time runs from its start to the child's end
		}
		x.locked(func() { sr.StartedAt = &began })
		if s.When != "" && !resuming { // a call waiting for its child passed its `when`
			x.env[budgetKey] = newBudget(ctx)
			if se := x.checkVars(s.When); se != nil {
				x.finish(sr, began, nil, se)
				end.err, end.step = se, s.Name
				return end
			}
			ok, err := x.e.checker.evalBool(s.When, x.env)
			if err == nil && !ok {
				// SKIPPED: it did not run; the finishing time records the
				// decision, which a resumed attempt keeps.
				x.locked(func() { sr.StartedAt, sr.FinishedAt = nil, &began })
				continue
			}
			if err != nil {
				se := fail(false, fmt.Errorf("when: %w", err))
				x.finish(sr, began, nil, se)
				end.err, end.step = se, s.Name
				return end
			}
		}
		sctx, endSpan := x.startStep(ctx, s)
		out, err, inner := x.run1(sctx, s, sr, iter)
		if inner.wait != nil && err == nil {
			// A WAIT or a waiting CALL_FLOW inside (a SWITCH's branch) paused
			// the run: the container stays unfinished, so that the attempt
			// that resumes the run enters it again, in the case it chose.
			x.endStep(endSpan, sr)
			inner.last = end.last
			return inner
		}
		var se *stepError
		switch {
		case err == nil, errors.Is(err, errFiltered):
		default:
			if !errors.As(err, &se) {
				se = fail(false, err)
			}
			se.msg = clipMessage(se.msg)
			out = se.output
		}
		if raw := x.finish(sr, began, out, se); out != nil {
			x.steps[s.Name] = out
			end.last = raw
		}
		x.endStep(endSpan, sr)
		if errors.Is(err, errFiltered) {
			end.filtered = s.Name
			return end
		}
		if until, ok := waitingUntil(*sr); ok && se == nil {
			end.wait, end.step = &until, s.Name // the release records the WAIT
			return end
		}
		if until, ok := automation.WaitingPoint(*sr); ok && se == nil {
			end.wait, end.step, end.waitpoint = &until, s.Name, journalKey(s.Name, iter)
			end.waitFor = automation.WaitingApproval
			if s.Type == automation.StepWait {
				end.waitFor = automation.WaitingCallback
			}
			return end
		}
		if childID, ok := automation.WaitingCall(*sr); ok && se == nil {
			until := x.callWaitUntil(childID)
			end.wait, end.step = &until, s.Name // the release records the call
			return end
		}
		if automation.AIContinues(*sr) && se == nil {
			// An AI loop out of time: parked due now, the next attempt
			// goes on from its journal with time of its own.
			now := x.e.clock()
			end.wait, end.step = &now, s.Name
			return end
		}
		if inner.halted() {
			// A nested list stopped the run (a false FILTER in a SWITCH
			// branch, the run's end, a journal that failed).
			inner.last = end.last
			return inner
		}
		goesOn := se == nil || (s.Type == automation.StepHTTP && s.ContinueOnFail)
		if goesOn && s.Type.SideEffects() && !(top && i == len(steps)-1) {
			if err := x.journalNow(ctx); err != nil {
				end.journalErr, end.step = err, s.Name
				return end
			}
		}
		if se != nil {
			if s.Type == automation.StepHTTP && s.ContinueOnFail {
				if out == nil {
					x.steps[s.Name] = map[string]any{"error": se.msg}
				}
				continue
			}
			if ctx.Err() != nil {
				end.interrupted, end.step = true, s.Name
				return end
			}
			end.err, end.step = se, s.Name
			return end
		}
	}
	return end
}

// finish records a step's end into sr and returns its output as recorded.
func (x *execution) finish(sr *automation.StepResult, began time.Time, out any, se *stepError) json.RawMessage {
	done := x.e.clock()
	logs := x.logs
	x.logs = nil
	var raw json.RawMessage
	x.locked(func() {
		sr.FinishedAt, sr.DurationMs, sr.Logs = &done, done.Sub(began).Milliseconds(), x.keepLogs(x.maskAll(logs))
		sr.Attempts = max(sr.Attempts, 1)
		sr.Status, sr.Error = automation.StepSucceeded, ""
		if se != nil {
			// The run's error is made of se.msg: masked once, here.
			se.msg = x.mask(se.msg)
			sr.Status, sr.Error = automation.StepFailed, se.msg
		}
		raw = x.maskJSON(x.e.record(out, min(x.e.maxOutput, x.e.maxRun-x.sh.spent)))
		x.sh.spent += int64(len(raw))
		sr.Output = raw
	})
	return raw
}

// journalNow hands the results so far to the journal, in order with any
// other scope's entry.
func (x *execution) journalNow(ctx context.Context) error {
	if x.sh.journal == nil {
		return nil
	}
	x.sh.jmu.Lock()
	defer x.sh.jmu.Unlock()
	return x.sh.journal(ctx, x.snapshot())
}

// run1 runs one step: a container's nested steps, or any other step. A
// container whose nested steps stopped the run returns how (inner).
//
//lint:ignore ST1008 the listEnd after the error says how nested steps ended the list, read only with it
func (x *execution) run1(ctx context.Context, s automation.Step, sr *automation.StepResult, iter string) (out any, err error, inner listEnd) {
	if se := x.checkStepVars(s); se != nil {
		return nil, se, listEnd{}
	}
	switch s.Type {
	case automation.StepSwitch:
		return x.switchStep(ctx, s, sr, iter)
	case automation.StepForEach:
		return x.forEach(ctx, s, sr, iter)
	}
	x.cur = sr
	if isWaitpoint(s) {
		return x.waitpoint(ctx, s, sr, iter)
	}
	out, err = x.step(ctx, s)
	attempts := 1
	if s.Type == automation.StepCallFlow || s.Type == automation.StepAI {
		// Each claim that looks at the child, or goes on with an AI loop,
		// counts (automation.callResumes).
		prev := x.sh.previous[journalKey(s.Name, iter)]
		if _, waiting := automation.WaitingCall(prev); waiting || automation.AIContinues(prev) {
			attempts = prev.Attempts + 1
		}
	}
	for s.Retry != nil && attempts < s.Retry.Attempts {
		var se *stepError
		if !errors.As(err, &se) || !se.retryable || !x.e.pause(ctx, s.Retry, attempts, se.retryAfter) {
			break
		}
		x.logs = nil
		out, err = x.step(ctx, s)
		attempts++
	}
	x.locked(func() { sr.Attempts = attempts })
	return out, err, listEnd{}
}

// switchStep runs the steps of the first case whose condition holds, or
// the default's; its output says which ({"case": i} or {"case": "default"}).
//
//lint:ignore ST1008 the listEnd after the error says how nested steps ended the list, read only with it
func (x *execution) switchStep(ctx context.Context, s automation.Step, sr *automation.StepResult, iter string) (any, error, listEnd) {
	x.env[budgetKey] = newBudget(ctx)
	var (
		which  any = "default"
		branch     = s.Default
	)
	if c, ok := x.chosenCase(s, iter); ok {
		// A resumed attempt keeps the branch the earlier one took.
		which = c
		if i, isIndex := c.(int); isIndex {
			branch = s.Cases[i].Steps
		}
	} else {
		for i, c := range s.Cases {
			ok, err := x.e.checker.evalBool(c.When, x.env)
			if err != nil {
				return nil, fail(false, fmt.Errorf("cases[%d].when: %w", i, err)), listEnd{}
			}
			if ok {
				which, branch = i, c.Steps
				break
			}
		}
	}
	out := map[string]any{"case": which}
	results := pending(branch)
	chosen, _ := json.Marshal(out)
	// The choice is recorded at once, so that a journal entry taken inside
	// the branch keeps it.
	x.locked(func() { sr.Steps, sr.Output = results, chosen })
	end := x.list(ctx, branch, results, iter, false)
	if end.err != nil {
		return out, &stepError{msg: "step " + end.step + ": " + end.err.msg, retryable: end.err.retryable, output: out}, listEnd{}
	}
	if end.interrupted || end.journalErr != nil {
		return out, &stepError{msg: "step " + end.step + " did not finish", retryable: true, output: out}, end
	}
	return out, nil, end
}

// forEach runs its steps once per item, up to s.Concurrency items at once,
// and outputs {"items": [{<step>: output, …}, …]} in item order. A false
// FILTER inside ends that item only. The first failed item stops the loop
// from starting more, and fails the step.
//
//lint:ignore ST1008 the listEnd after the error says how nested steps ended the list, read only with it
func (x *execution) forEach(ctx context.Context, s automation.Step, sr *automation.StepResult, iter string) (any, error, listEnd) {
	x.env[budgetKey] = newBudget(ctx)
	items, journal, err := x.loopItems(s, iter)
	if err != nil {
		return nil, err, listEnd{}
	}
	its := make([]automation.Iteration, len(items))
	for i := range items {
		its[i] = automation.Iteration{Index: i, Status: automation.StepSkipped, Steps: pending(s.Steps)}
	}
	// The list goes with the first journal entry taken inside the loop.
	x.locked(func() { sr.Iterations, sr.ItemsJournal = its, journal })
	outputs := make([]any, len(items))
	ends := make([]listEnd, len(items))
	conc := min(max(s.Concurrency, 1), automation.MaxForEachConcurrency)
	var (
		wg      sync.WaitGroup
		sem     = make(chan struct{}, conc)
		stopped = make(chan struct{})
		once    sync.Once
	)
	stop := func() { once.Do(func() { close(stopped) }) }
loop:
	for i, item := range items {
		select {
		case sem <- struct{}{}:
		case <-stopped:
			break loop
		}
		select {
		case <-stopped: // an item failed while this one waited its turn
			<-sem
			break loop
		default:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			path := joinIter(iter, i)
			y := x.fork(item, i, path)
			end := y.list(ctx, s.Steps, its[i].Steps, path, false)
			ends[i] = end
			status, msg := automation.StepSucceeded, ""
			switch {
			case end.err != nil:
				status, msg = automation.StepFailed, "step "+end.step+": "+end.err.msg
				stop()
			case end.interrupted || end.journalErr != nil:
				status, msg = automation.StepFailed, "step "+end.step+" did not finish"
				stop()
			}
			// The item's outputs as its steps left them.
			own := map[string]any{}
			automation.WalkSteps(s.Steps, func(st *automation.Step) {
				if v, ok := y.steps[st.Name]; ok {
					own[st.Name] = v
				}
			})
			outputs[i] = own
			x.locked(func() { its[i].Status, its[i].Error = status, msg })
		}()
	}
	wg.Wait()
	out := map[string]any{"items": outputs}
	for i, end := range ends {
		switch {
		case end.err != nil:
			return out, &stepError{msg: fmt.Sprintf("item %d: step %s: %s", i, end.step, end.err.msg), retryable: end.err.retryable, output: out}, listEnd{}
		case end.interrupted || end.journalErr != nil:
			return out, &stepError{msg: fmt.Sprintf("item %d: step %s did not finish", i, end.step), retryable: true, output: out}, end
		}
	}
	x.locked(func() { sr.ItemsJournal = nil }) // finished: restored whole, list not needed
	return out, nil, listEnd{}
}

// MaxJournaledItemsBytes bounds the JSON of a FOR_EACH's list kept in its
// journal (StepResult.ItemsJournal), besides the run's output budget: a
// longer list is journaled by its length and digest only, so that run
// records stay storable (a DynamoDB item holds 400 KB).
const MaxJournaledItemsBytes = 64 << 10

// loopItems is the list FOR_EACH s iterates and its journal. An attempt
// that resumes the loop takes the list an earlier attempt journaled, not
// what its expression says now; when only the list's digest was kept, the
// list is evaluated again and must be the same, or the step fails (for
// good: items already iterated belong to the other list).
func (x *execution) loopItems(s automation.Step, iter string) ([]any, *automation.ItemsJournal, error) {
	prev, ok := x.sh.previous[journalKey(s.Name, iter)]
	if j := prev.ItemsJournal; ok && prev.Type == automation.StepForEach && j != nil && len(j.Items) > 0 {
		var items []any
		if err := json.Unmarshal(j.Items, &items); err == nil && len(items) == j.Count {
			x.locked(func() { x.sh.spent += int64(len(j.Items)) })
			return items, j, nil
		}
	}
	items, err := x.items(s)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(items)
	if err != nil {
		return items, nil, nil // not JSON: nothing to journal it by
	}
	sum := sha256.Sum256(b)
	j := &automation.ItemsJournal{Count: len(items), SHA256: hex.EncodeToString(sum[:])}
	if was := prev.ItemsJournal; ok && was != nil && (was.Count != j.Count || was.SHA256 != j.SHA256) {
		return nil, nil, &stepError{msg: fmt.Sprintf("items changed since an earlier attempt of this run began the loop "+
			"(%d items then, %d now): the loop is not resumed over another list", was.Count, j.Count)}
	}
	x.locked(func() {
		if int64(len(b)) <= min(MaxJournaledItemsBytes, x.e.maxRun-x.sh.spent) {
			j.Items = b
			x.sh.spent += int64(len(b))
		}
	})
	return items, j, nil
}

// items evaluates a FOR_EACH's list: an expression, or a JSON array whose
// strings are templates.
func (x *execution) items(s automation.Step) ([]any, error) {
	var v any
	if err := json.Unmarshal(s.Items, &v); err != nil {
		return nil, &stepError{msg: "items is not valid JSON"}
	}
	var list any
	switch v := v.(type) {
	case string:
		got, err := x.e.checker.evalExpr(v, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("items: %w", err))
		}
		list = got
	default:
		got, err := x.e.checker.evalValue(v, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("items%w", err))
		}
		list = got
	}
	if list == nil {
		return []any{}, nil // nothing to loop over
	}
	items, ok := list.([]any)
	if !ok {
		// A typed slice, such as a range (1..10).
		v := reflect.ValueOf(list)
		if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
			return nil, &stepError{msg: fmt.Sprintf("items must be a list, got %s", describeValue(list))}
		}
		if v.Len() > automation.MaxForEachItems {
			return nil, &stepError{msg: fmt.Sprintf("items has %d entries; FOR_EACH runs over at most %d (split the list, or page through it)", v.Len(), automation.MaxForEachItems)}
		}
		items = make([]any, v.Len())
		for i := range items {
			items[i] = v.Index(i).Interface()
		}
	}
	if len(items) > automation.MaxForEachItems {
		return nil, &stepError{msg: fmt.Sprintf("items has %d entries; FOR_EACH runs over at most %d (split the list, or page through it)", len(items), automation.MaxForEachItems)}
	}
	return items, nil
}

// usesState reports whether the flow's steps read or write its state, so
// that runs of other flows cost no read.
func (x *execution) usesState() bool {
	uses := false
	check := func(s *automation.Step) {
		if s.Type == automation.StepStore {
			uses = true
		}
	}
	automation.WalkSteps(x.flow.Steps, check)
	automation.WalkSteps(x.flow.OnError, check)
	return uses || bytes.Contains(x.stepsJSON(), []byte("state"))
}

// stepsJSON is the JSON of the flow's steps and onError steps, encoded
// once per attempt for the checks of what the flow reads (usesState,
// usesVars).
func (x *execution) stepsJSON() []byte {
	if x.stepsText == nil {
		x.stepsText, _ = json.Marshal(struct{ S, O []automation.Step }{x.flow.Steps, x.flow.OnError})
	}
	return x.stepsText
}

// loadState puts the flow's state in scope as `state`, when it uses it.
func (x *execution) loadState(ctx context.Context) *stepError {
	x.env["state"] = map[string]any{}
	if x.e.state == nil || !x.usesState() {
		return nil
	}
	st, err := x.e.state.FlowState(ctx, x.flow.Project, x.flow.ID)
	if err != nil {
		x.e.log.WarnContext(ctx, "read flow state", "run", x.run.ID, "flow", x.flow.ID, "err", err)
		return &stepError{msg: "the flow's state could not be read; the run will be retried", retryable: true}
	}
	x.env["state"] = st
	return nil
}

// store sets and deletes keys of the flow's state; later steps of the
// scope, and later runs, read the new state.
func (x *execution) store(ctx context.Context, s automation.Step) (any, error) {
	if x.e.state == nil {
		return nil, &stepError{msg: "STORE steps are not available in this deployment"}
	}
	set := map[string]any{}
	if len(s.Set) > 0 {
		v, err := decode("set", s.Set)
		if err != nil {
			return nil, fail(false, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &stepError{msg: "set must be a JSON object"}
		}
		out, err := x.e.checker.evalValue(m, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("set.%w", err))
		}
		set = out.(map[string]any)
	}
	st, err := x.e.state.StoreFlowState(ctx, x.flow.Project, x.flow.ID, set, s.Delete)
	if err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			return nil, &stepError{msg: ae.Message}
		}
		x.e.log.WarnContext(ctx, "store flow state", "run", x.run.ID, "step", s.Name, "err", err)
		return nil, &stepError{msg: "the flow's state could not be saved; the run will be retried", retryable: true}
	}
	x.env["state"] = st
	deleted := s.Delete
	if deleted == nil {
		deleted = []string{}
	}
	return map[string]any{"set": set, "deleted": deleted}, nil
}

var _ automation.Executor = (*Engine)(nil)

// RunOnError runs f's onError steps for r, which ended FAILED or TIMEOUT
// for good, with `error` ({"step", "message"}) in scope besides what the
// run's steps saw. Their results go in r.OnErrorSteps; r's status, error
// and steps stay. A failing onError step is recorded and ends the onError
// steps, nothing more.
//
// They follow the journal rule of the run's steps: an onError step that
// r.OnErrorSteps records as finished (an earlier attempt's, journaled) is
// not executed again, and after each one with side effects that has a
// step after it, journal (when not nil) records the onError results so
// far before the next one starts. A journal that fails ends them there.
func (e *Engine) RunOnError(ctx context.Context, f automation.Flow, r automation.Run, journal automation.Journal) automation.Run {
	if len(f.OnError) == 0 {
		return r
	}
	results := pending(f.OnError)
	x := e.newExecution(ctx, f, &r, journal, journalIndex(r.OnErrorSteps))
	x.sh.results = &results
	x.sh.onError = true
	step, msg := failedStep(r)
	x.env["error"] = map[string]any{"step": step, "message": msg}
	for _, sr := range r.Steps {
		if out := recorded(sr.Output); out != nil && sr.Status != automation.StepSkipped {
			x.steps[sr.Name] = out
		}
	}
	response := r.Response
	if _, err := x.prepare(ctx); err == nil {
		// As the run's own steps: the last one's result is recorded with
		// the run's end.
		x.list(ctx, f.OnError, results, "", true)
	} else if len(results) > 0 {
		results[0].Status, results[0].Error = automation.StepFailed, err.msg
	}
	r.Response = response // an onError RESPOND answers nobody
	r.OnErrorSteps = x.snapshot()
	r.Usage = automation.StepsUsage(r.Steps, r.OnErrorSteps)
	e.log.InfoContext(ctx, "onError steps ran", "run", r.ID, "flow", f.ID)
	return r
}

// failedStep names the step a run failed at and the message, from its
// results (the innermost failed step of a SWITCH or FOR_EACH is in the
// message) or, failing that, its error.
func failedStep(r automation.Run) (string, string) {
	for _, st := range r.Steps {
		if st.Status == automation.StepFailed {
			return st.Name, st.Error
		}
	}
	name, msg := "", r.Error
	if rest, ok := strings.CutPrefix(r.Error, "step "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			name, msg = rest[:i], rest[i+2:]
		}
	}
	return name, msg
}

// wait starts a WAIT: its output says until when the run pauses; list
// then ends the attempt, and the run resumes after the step at that time.
func (x *execution) wait(s automation.Step) (any, error) {
	if s.Until != "" {
		until, err := x.waitUntil(s)
		if err != nil {
			return nil, fail(false, err)
		}
		return map[string]any{"until": until.Format(time.RFC3339Nano)}, nil
	}
	d, err := s.WaitDuration()
	if err != nil {
		return nil, fail(false, err)
	}
	until := x.e.clock().Add(d)
	return map[string]any{"until": until.Format(time.RFC3339Nano), "duration": s.Duration}, nil
}

// waitingUntil reads the time a recorded WAIT step pauses its run until.
func waitingUntil(sr automation.StepResult) (time.Time, bool) {
	if sr.Type != automation.StepWait || sr.Status != automation.StepSucceeded {
		return time.Time{}, false
	}
	var out struct{ Until time.Time }
	if err := json.Unmarshal(sr.Output, &out); err != nil || out.Until.IsZero() {
		return time.Time{}, false
	}
	return out.Until, true
}

// chosenCase is the case an earlier attempt's SWITCH s took (an index or
// "default"), when it journaled one.
func (x *execution) chosenCase(s automation.Step, iter string) (any, bool) {
	prev, ok := x.sh.previous[journalKey(s.Name, iter)]
	if !ok || prev.Type != automation.StepSwitch || len(prev.Output) == 0 {
		return nil, false
	}
	var out struct{ Case any }
	if err := json.Unmarshal(prev.Output, &out); err != nil {
		return nil, false
	}
	switch c := out.Case.(type) {
	case float64:
		if i := int(c); float64(i) == c && i >= 0 && i < len(s.Cases) {
			return i, true
		}
	case string:
		if c == "default" {
			return c, true
		}
	}
	return nil, false
}

// restoreBranch puts the outputs of a restored SWITCH's branch back in
// scope, as when the branch ran (FOR_EACH items stay inside its output).
func (x *execution) restoreBranch(steps []automation.StepResult) {
	for _, st := range steps {
		if out := recorded(st.Output); out != nil && st.Status != automation.StepSkipped {
			x.steps[st.Name] = out
		}
		x.restoreBranch(st.Steps)
	}
}
