package automation

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kinds of failure. Every error a client may see wraps one of these, so that
// transports map them to a status without knowing the domain.
var (
	ErrInvalid      = errors.New("invalid")      // 400
	ErrUnauthorized = errors.New("unauthorized") // 401
	ErrForbidden    = errors.New("forbidden")    // 403
	ErrNotFound     = errors.New("not found")    // 404
	ErrConflict     = errors.New("conflict")     // 409
	ErrUnavailable  = errors.New("unavailable")  // 503: try again later
)

// Error is a failure the client may see: Code and Message are sent as is, so
// they must never carry internals or secrets.
type Error struct {
	Kind    error // ErrInvalid, ErrNotFound, ...
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// Invalid is a 400 with code VALIDATION_ERROR.
func Invalid(format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Code: "VALIDATION_ERROR", Message: fmt.Sprintf(format, args...)}
}

// InvalidCode is a 400 with a specific code, such as INVALID_CURSOR.
func InvalidCode(code, format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing resource of the given kind: NotFound("flow", id)
// has code FLOW_NOT_FOUND. A resource of another project is reported the same
// way, so that IDs leak nothing.
func NotFound(kind, id string) *Error {
	return &Error{
		Kind:    ErrNotFound,
		Code:    strings.ToUpper(strings.ReplaceAll(kind, " ", "_")) + "_NOT_FOUND",
		Message: fmt.Sprintf("%s %q not found", kind, ClipID(id)),
	}
}

// Conflict is a 409.
func Conflict(code, format string, args ...any) *Error {
	return &Error{Kind: ErrConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Forbidden is a 403, for plan and IP restrictions.
func Forbidden(code, format string, args ...any) *Error {
	return &Error{Kind: ErrForbidden, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unauthorized is a 401.
func Unauthorized(code, format string, args ...any) *Error {
	return &Error{Kind: ErrUnauthorized, Code: code, Message: fmt.Sprintf(format, args...)}
}

// maxIDInMessage bounds an identifier quoted back in a message: IDs come
// from URLs, and a 100,000-character one must not be echoed whole.
const maxIDInMessage = 64

// ClipID shortens a client-chosen identifier for a message: at most 64
// bytes, cut on a character boundary, then "…".
func ClipID(id string) string {
	if len(id) <= maxIDInMessage {
		return id
	}
	cut := maxIDInMessage
	for cut > 0 && !utf8.RuneStart(id[cut]) {
		cut--
	}
	return id[:cut] + "…"
}

// Unavailable is a 503: the store cannot serve the request now (disk full,
// database read-only or locked); the client may try again later.
func Unavailable(code, format string, args ...any) *Error {
	return &Error{Kind: ErrUnavailable, Code: code, Message: fmt.Sprintf(format, args...)}
}

// IsNotFound reports whether err wraps ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
