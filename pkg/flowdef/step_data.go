package flowdef

import "strings"

// SET, FILTER and STORE: steps that shape data and the flow's state.

func init() {
	register(Rules{
		Type:   StepSet,
		Fields: []string{"values"},
		Check: func(c Checks, st *Step, at string) error {
			if !IsJSONObject(st.Values) {
				return Invalid(`%s.values is required for SET and must be an object, e.g. {"ref": "{{ trigger.body.ref }}"}`, at)
			}
			return CheckTemplates(c, at+".values", st.Values)
		},
	})
	register(Rules{
		Type:   StepFilter,
		Fields: []string{"condition"},
		Check: func(c Checks, st *Step, at string) error {
			if strings.TrimSpace(st.Condition) == "" {
				return Invalid("%s.condition is required for FILTER, e.g. \"trigger.body.event == 'push'\"", at)
			}
			if err := c.Expression(st.Condition); err != nil {
				return Invalid("%s.condition: %v", at, err)
			}
			return nil
		},
	})
	register(Rules{
		Type:        StepStore,
		Fields:      []string{"set", "delete"},
		SideEffects: true,
		Check:       checkStore,
	})
}

// checkStore checks a STORE step's keys and templates.
func checkStore(c Checks, st *Step, at string) error {
	if len(st.Set) == 0 && len(st.Delete) == 0 {
		return Invalid(`%s: STORE needs set (an object of keys to values, e.g. {"lastSha": "{{ trigger.body.after }}"}) or delete (a list of keys)`, at)
	}
	if len(st.Set) > 0 {
		if !IsJSONObject(st.Set) {
			return Invalid(`%s.set must be an object, e.g. {"lastSha": "{{ trigger.body.after }}"}`, at)
		}
		if err := CheckTemplates(c, at+".set", st.Set); err != nil {
			return err
		}
	}
	for i, k := range st.Delete {
		if k == "" || len(k) > 256 {
			return Invalid("%s.delete[%d]: a key of 1 to 256 characters", at, i)
		}
	}
	return nil
}
