package flowdef

import (
	"fmt"
	"unicode/utf8"
)

// Error is a definition that breaks a rule of the language. Message names
// the field by its path (steps[0].cases[1].url), the step by its name, and
// what is allowed; the domain shows it as a 400.
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

// Invalid returns an *Error with a formatted message.
func Invalid(format string, args ...any) error {
	return &Error{Message: fmt.Sprintf(format, args...)}
}

// ClipID bounds a value quoted back in a message, so that a long name or
// path cannot make a long error. It cuts at a rune's start, so that the
// message stays valid UTF-8 (a cut inside a rune would show as U+FFFD in
// the JSON error body).
func ClipID(id string) string {
	if len(id) <= 64 {
		return id
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return id[:cut] + "…"
}
