package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Checks are what the rules need from the expression language, which lives
// with the engine that evaluates it, so that what validates is what runs.
type Checks interface {
	// Expression checks a bare expression, such as a FILTER condition.
	Expression(src string) error
	// Template checks a string that may hold {{ expression }} parts.
	Template(s string) error
	// ResponseExpression checks a bare expression that may also use
	// `response` (an HTTP answer), as paginate and POLL expressions do.
	ResponseExpression(src string) error
}

// CheckTemplates checks every string inside a JSON value as a template.
func CheckTemplates(c Checks, at string, raw json.RawMessage) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return Invalid("%s is not valid JSON", at)
	}
	return walkTemplates(c, at, v)
}

func walkTemplates(c Checks, at string, v any) error {
	switch x := v.(type) {
	case string:
		if err := c.Template(x); err != nil {
			return Invalid("%s: %v", at, err)
		}
	case map[string]any:
		for k, e := range x {
			if err := walkTemplates(c, at+"."+k, e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := walkTemplates(c, fmt.Sprintf("%s[%d]", at, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// IsJSONObject reports whether raw is a JSON object.
func IsJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// CheckText checks a required line of text of at most max characters.
func CheckText(field, v string, max int) error {
	if strings.TrimSpace(v) == "" {
		return Invalid("%s is required and must not be blank", field)
	}
	if utf8.RuneCountInString(v) > max {
		return Invalid("%s is longer than %d characters", field, max)
	}
	return nil
}

// HasControl reports whether s holds a control character other than a tab,
// which no HTTP field value may carry (CR and LF would split the header).
func HasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}

// IsToken reports whether s is an HTTP header name (RFC 9110 token).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// join lists step types for a message.
func join(ts []StepType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
