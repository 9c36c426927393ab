package rundoc

import (
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

// EncodeRunAndSummary is a run's stored document and its summary column
// (EncodeRun, EncodeSummary), the summary cut out of the document's bytes
// rather than encoded a second time: every run write stores both, and the
// second encoding was as costly as the first (reflection over the same
// run). The bytes are exactly encodeSummary's (TestSummaryFromDoc).
func EncodeRunAndSummary(r automation.Run) (doc, sum string, err error) {
	b, err := r.MarshalJSON() // as encodeRun
	if err != nil {
		return "", "", fmt.Errorf("encode run: %w", err)
	}
	s, err := SummaryFromDoc(b)
	if err != nil { // not a document encodeRun writes: encode it again
		sum, err = EncodeSummary(r)
		return string(b), sum, err
	}
	return string(b), string(s), nil
}

// SummaryFromDoc cuts a run's document (compact JSON, as encodeRun writes
// it) down to what automation.Run.Summary keeps: the trigger's body
// becomes null and its rawBody and caller's wait and secrets go, each step loses its output, nested
// results (steps, iterations) and itemsJournal, onErrorSteps, onErrorOf,
// draftDefinition and trace go, the response's body becomes null, and null steps become [].
// Everything else is copied as it is, in its order.
func SummaryFromDoc(doc []byte) ([]byte, error) {
	return eachMember(make([]byte, 0, len(doc)), doc, func(out, key, val []byte) ([]byte, bool, error) {
		switch string(key) {
		case `"trigger"`, `"response"`:
			if string(val) == "null" {
				return append(out, val...), true, nil
			}
			out, err := eachMember(out, val, func(out, k, v []byte) ([]byte, bool, error) {
				switch string(k) {
				case `"body"`:
					return append(out, "null"...), true, nil
				case `"rawBody"`:
					return out, false, nil
				case `"caller"`: // without wait and secrets, as Caller shows it (automation/callflow.go)
					if string(v) == "null" {
						return append(out, v...), true, nil
					}
					out, err := eachMember(out, v, func(out, ck, cv []byte) ([]byte, bool, error) {
						return append(out, cv...), string(ck) != `"wait"` && string(ck) != `"secrets"`, nil
					})
					return out, true, err
				}
				return append(out, v...), true, nil
			})
			return out, true, err
		case `"steps"`:
			if string(val) == "null" {
				return append(out, "[]"...), true, nil
			}
			out, err := eachElem(out, val, func(out, step []byte) ([]byte, error) {
				return eachMember(out, step, func(out, k, v []byte) ([]byte, bool, error) {
					switch string(k) {
					case `"output"`, `"steps"`, `"iterations"`, `"itemsJournal"`:
						return out, false, nil
					}
					return append(out, v...), true, nil
				})
			})
			return out, true, err
		case `"onErrorSteps"`, `"onErrorOf"`, `"draftDefinition"`, `"trace"`:
			return out, false, nil
		}
		return append(out, val...), true, nil
	})
}

var errNotCompact = errors.New("not a compact JSON document")

// eachMember appends the object obj to out member by member, each value
// as fn appends it; fn's keep false drops the member (fn then appends
// nothing).
func eachMember(out, obj []byte, fn func(out, key, val []byte) ([]byte, bool, error)) ([]byte, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errNotCompact
	}
	out = append(out, '{')
	first := true
	for i := 1; i < len(obj)-1; {
		k, err := skipString(obj, i)
		if err != nil {
			return nil, err
		}
		if k >= len(obj) || obj[k] != ':' {
			return nil, errNotCompact
		}
		v, err := skipValue(obj, k+1)
		if err != nil {
			return nil, err
		}
		mark := len(out)
		if !first {
			out = append(out, ',')
		}
		out = append(out, obj[i:k+1]...)
		var keep bool
		out, keep, err = fn(out, obj[i:k], obj[k+1:v])
		if err != nil {
			return nil, err
		}
		if keep {
			first = false
		} else {
			out = out[:mark]
		}
		i = v
		if i < len(obj)-1 {
			if obj[i] != ',' || i+1 == len(obj)-1 {
				return nil, errNotCompact
			}
			i++
		}
	}
	return append(out, '}'), nil
}

// eachElem appends the array arr to out, each element as fn appends it.
func eachElem(out, arr []byte, fn func(out, elem []byte) ([]byte, error)) ([]byte, error) {
	if len(arr) < 2 || arr[0] != '[' || arr[len(arr)-1] != ']' {
		return nil, errNotCompact
	}
	out = append(out, '[')
	for i := 1; i < len(arr)-1; {
		e, err := skipValue(arr, i)
		if err != nil {
			return nil, err
		}
		if i > 1 {
			out = append(out, ',')
		}
		if out, err = fn(out, arr[i:e]); err != nil {
			return nil, err
		}
		i = e
		if i < len(arr)-1 {
			if arr[i] != ',' || i+1 == len(arr)-1 {
				return nil, errNotCompact
			}
			i++
		}
	}
	return append(out, ']'), nil
}

// skipString returns the index just past the JSON string at b[i].
func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errNotCompact
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++ // the escaped byte; \uXXXX's digits need no care
		case '"':
			return j + 1, nil
		}
	}
	return 0, errNotCompact
}

// skipValue returns the index just past the compact JSON value at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errNotCompact
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errNotCompact
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("%w: empty value at %d", errNotCompact, i)
	}
	return j, nil
}

// EncodeSummary is the summary of r as a list stores it.
func EncodeSummary(r automation.Run) (string, error) {
	return EncodeRun(r.Summary())
}

// EncodeRun is the run's stored document. It calls Run.MarshalJSON itself:
// through json.Marshal, the output of a MarshalJSON is checked and
// compacted once more, a pass over the whole document (trigger body
// included) that its own json.Marshal already made.
func EncodeRun(r automation.Run) (string, error) {
	b, err := r.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("encode run: %w", err)
	}
	return string(b), nil
}
