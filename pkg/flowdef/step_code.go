package flowdef

import "strings"

func init() {
	register(Rules{
		Type:        StepCode,
		Fields:      []string{"code", "timeout", "retry"},
		SideEffects: true,
		Check:       checkCode,
	})
}

// checkCode checks what can be checked without a JavaScript engine: the
// code is there and not too long, and the timeout is in range. Whether it
// compiles is the domain's to check, where a backend can (a script with a
// syntax error otherwise fails at run time, as the step's error).
func checkCode(_ Checks, st *Step, at string) error {
	if strings.TrimSpace(st.Code) == "" {
		return Invalid(`%s.code is required for CODE: the body of a JavaScript function, e.g. "return {total: trigger.body.items.length}"`, at)
	}
	if len(st.Code) > MaxCodeBytes {
		return Invalid("%s.code is %d bytes; at most %d are allowed", at, len(st.Code), MaxCodeBytes)
	}
	if _, err := st.CodeTimeout(); err != nil {
		return Invalid("%s.%v", at, err)
	}
	return nil
}
