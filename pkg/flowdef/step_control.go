package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// SWITCH, FOR_EACH, WAIT and CALL_FLOW: steps that shape the run.

func init() {
	register(Rules{
		Type:   StepSwitch,
		Fields: []string{"cases", "default"},
		Check:  checkSwitch,
	})
	register(Rules{
		Type:   StepForEach,
		Fields: []string{"items", "steps", "concurrency"},
		Check:  checkForEach,
	})
	register(Rules{
		Type:        StepWait,
		Fields:      []string{"duration", "for", "until", "timeout", "notify"},
		SideEffects: true,
		Parks: func(*Step) (string, string) {
			return "WAIT cannot run inside FOR_EACH; wait before or after the loop",
				"WAIT cannot run in onError steps; they run once the run has ended"
		},
		Check: checkWait,
	})
	register(Rules{
		Type:        StepCallFlow,
		Fields:      []string{"flowId", "input", "wait", "flow"},
		SideEffects: true,
		Parks: func(st *Step) (string, string) {
			if st.Wait != nil && !*st.Wait {
				return "", ""
			}
			return `a CALL_FLOW that waits cannot run inside FOR_EACH; set "wait": false, or call before or after the loop`,
				`a CALL_FLOW that waits cannot run in onError steps; they run once the run has ended (set "wait": false)`
		},
		Check: checkCallFlow,
	})
}

// WaitForCallback is WAIT's "for" that waits for a POST to a one-time
// URL (docs/flows.md, "WAIT").
const WaitForCallback = "callback"

// checkWait checks a WAIT: a duration, an "until" expression, or "for":
// "callback" with its timeout and notify steps.
func checkWait(c Checks, st *Step, at string) error {
	switch st.For {
	case "":
		if len(st.Notify) > 0 || st.Timeout != "" {
			return Invalid(`%s: timeout and notify apply to a WAIT with "for": "callback"`, at)
		}
		switch {
		case st.Duration != "" && st.Until != "":
			return Invalid(`%s: give duration or until, not both`, at)
		case strings.TrimSpace(st.Until) != "":
			if err := c.Expression(st.Until); err != nil {
				return Invalid("%s.until: %v", at, err)
			}
			return nil
		}
		if _, err := st.WaitDuration(); err != nil {
			return Invalid("%s.%v", at, err)
		}
		return nil
	case WaitForCallback:
		if st.Duration != "" || st.Until != "" {
			return Invalid(`%s: a WAIT for a callback takes timeout (how long it waits), not duration or until`, at)
		}
		if _, err := st.WaitTimeout(); err != nil {
			return Invalid("%s.%v", at, err)
		}
		return checkNotify(st, at)
	}
	return Invalid(`%s.for %q: the only value is "callback" (leave it out to wait for a duration or until a time)`, at, ClipID(st.For))
}

// checkSwitch checks a SWITCH's cases; their steps are the walker's.
func checkSwitch(c Checks, st *Step, at string) error {
	if len(st.Cases) == 0 {
		return Invalid(`%s.cases is required for SWITCH, e.g. [{"when": "trigger.body.type == 'invoice.paid'", "steps": [...]}]`, at)
	}
	for j, cs := range st.Cases {
		cat := fmt.Sprintf("%s.cases[%d]", at, j)
		if strings.TrimSpace(cs.When) == "" {
			return Invalid("%s.when is required: the condition that selects this case", cat)
		}
		if err := c.Expression(cs.When); err != nil {
			return Invalid("%s.when: %v", cat, err)
		}
	}
	return nil
}

// checkForEach checks a FOR_EACH's list and concurrency; its steps are the
// walker's.
func checkForEach(c Checks, st *Step, at string) error {
	items := bytes.TrimSpace(st.Items)
	switch {
	case len(items) == 0:
		return Invalid(`%s.items is required for FOR_EACH: an expression such as "trigger.body.items", or a JSON array`, at)
	case items[0] == '"':
		var src string
		if err := json.Unmarshal(items, &src); err != nil || strings.TrimSpace(src) == "" {
			return Invalid("%s.items: use an expression such as \"trigger.body.items\", or a JSON array", at)
		}
		if err := c.Expression(src); err != nil {
			return Invalid("%s.items: %v", at, err)
		}
	case items[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(items, &list); err != nil {
			return Invalid("%s.items is not valid JSON", at)
		}
		if len(list) > MaxForEachItems {
			return Invalid("%s.items: %d items; FOR_EACH runs over at most %d", at, len(list), MaxForEachItems)
		}
		if err := CheckTemplates(c, at+".items", items); err != nil {
			return err
		}
	default:
		return Invalid("%s.items: use an expression string such as \"trigger.body.items\", or a JSON array", at)
	}
	if st.Concurrency == 0 {
		st.Concurrency = 1
	}
	if st.Concurrency < 1 || st.Concurrency > MaxForEachConcurrency {
		return Invalid("%s.concurrency %d: use 1 to %d (1 runs the items one after another)", at, st.Concurrency, MaxForEachConcurrency)
	}
	if len(st.Steps) == 0 {
		return Invalid("%s.steps is required for FOR_EACH: the steps run for each item, with item and index in scope", at)
	}
	return nil
}

// checkCallFlow checks a CALL_FLOW step: a flowId (a portable document's
// flow name is resolved before), input any JSON whose strings are
// templates, and wait true by default. That the flow exists in the
// project is the domain's to check.
func checkCallFlow(c Checks, st *Step, at string) error {
	if strings.TrimSpace(st.FlowID) == "" {
		return Invalid(`%s.flowId is required for CALL_FLOW: the ID of a flow of this project, e.g. "flw_…"`, at)
	}
	if len(st.Input) > 0 {
		if err := CheckTemplates(c, at+".input", st.Input); err != nil {
			return err
		}
	}
	if st.Wait == nil {
		wait := true
		st.Wait = &wait
	}
	return nil
}
