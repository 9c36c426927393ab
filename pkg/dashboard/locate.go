package dashboard

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"flowservice/pkg/automation"
)

// The editor shows where a message points: the line and column of the
// field the Service names ("steps[1].url"), found by walking the text's
// JSON tokens, or of a syntax error.

var pathPartRE = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// splitField turns "steps[1].cases[0].when" into steps, 1, cases, 0, when.
func splitField(field string) []string {
	var out []string
	for _, p := range pathPartRE.FindAllString(field, -1) {
		out = append(out, strings.Trim(p, "[]"))
	}
	return out
}

// locateField returns the 1-based line and column where field's key (or,
// for an array element, its value) starts in text; ok is false when text
// has no such field or is not JSON.
func locateField(text, field string) (line, col int, ok bool) {
	want := strings.Join(splitField(field), "\x00")
	if want == "" {
		return 0, 0, false
	}
	walkJSON(text, func(path []string, start int) bool {
		if strings.Join(path, "\x00") != want {
			return true
		}
		line, col = automation.JSONPosition([]byte(text), int64(start+1))
		ok = true
		return false
	})
	return line, col, ok
}

// keyPath is where text first has the object key key: "steps[1].ulr",
// or "" when it has none.
func keyPath(text, key string) string {
	found := ""
	walkJSON(text, func(path []string, _ int) bool {
		if len(path) == 0 || path[len(path)-1] != key {
			return true
		}
		var b strings.Builder
		for i, p := range path {
			if _, err := strconv.Atoi(p); err == nil {
				b.WriteString("[" + p + "]")
				continue
			}
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(p)
		}
		found = b.String()
		return false
	})
	return found
}

// walkJSON calls visit with the path and start offset of every object key
// and every array element of text, in order, until visit returns false or
// the text ends (or stops being JSON).
func walkJSON(text string, visit func(path []string, start int) bool) {
	type frame struct {
		obj     bool
		wantKey bool
		key     string
		idx     int
	}
	var stack []frame
	path := func() []string {
		out := make([]string, len(stack))
		for i, f := range stack {
			out[i] = f.key
			if !f.obj {
				out[i] = strconv.Itoa(f.idx)
			}
		}
		return out
	}
	// valueDone moves the parent past the value that just ended.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	// start skips what lies between the previous token and this one.
	start := func(offset int64) int {
		i := int(offset)
		for i < len(text) && strings.ContainsRune(" \t\r\n,:", rune(text[i])) {
			i++
		}
		return i
	}
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].obj && stack[top].wantKey {
			if k, isKey := tok.(string); isKey {
				stack[top].key, stack[top].wantKey = k, false
				if !visit(path(), start(before)) {
					return
				}
				continue
			}
		}
		if top >= 0 && !stack[top].obj && tok != json.Delim(']') && !visit(path(), start(before)) {
			return
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}
