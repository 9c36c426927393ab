package httpapi

import (
	"fmt"

	"flowservice/pkg/automation"
)

// MaxJSONDepth bounds how deeply arrays and objects may nest in a JSON
// request body, on the receivers and the management API alike. A stored run
// wraps the webhook body two levels deeper (run -> trigger -> body), and
// encoding/json refuses to read back anything deeper than 10,000 levels, so
// a body that passed here could once be stored yet never read again; 64 is
// far below that and far above what any real payload uses.
const MaxJSONDepth = 64

// jsonDepthExceeds reports whether the JSON text b nests arrays and objects
// deeper than limit. It scans the bytes without building any value, so a
// hostile body costs one pass and no memory; brackets inside strings do not
// count. b need not be valid JSON: validity is checked separately.
func jsonDepthExceeds(b []byte, limit int) bool {
	depth := 0
	var str jsonStrings
	for _, c := range b {
		if str.skip(c) {
			continue
		}
		switch c {
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// checkDepth refuses a JSON body nested deeper than MaxJSONDepth with a 400
// BODY_TOO_DEEP, before anything is decoded or stored.
func checkDepth(b []byte) error {
	if jsonDepthExceeds(b, MaxJSONDepth) {
		return tooDeep()
	}
	return nil
}

func tooDeep() error {
	return automation.InvalidCode("BODY_TOO_DEEP",
		"%s", fmt.Sprintf("request body nests arrays and objects deeper than %d levels", MaxJSONDepth))
}
