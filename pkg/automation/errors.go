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
	ErrRateLimited  = errors.New("rate limited") // 429: over a quota, retry later
	// ErrNotImplemented is a 501: the backend has no such feature (user
	// accounts without a UserStore).
	ErrNotImplemented = errors.New("not implemented")
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

// Conflict codes that adapters report and the domain acts on. Adapters build
// them with the constructors below and callers test them with the
// predicates, so that no package compares code strings.
const (
	CodeRunExists     = "RUN_EXISTS"
	CodeRunFinished   = "RUN_FINISHED"
	CodeRunClaimed    = "RUN_CLAIMED"
	CodeRunLeaseLost  = "RUN_LEASE_LOST"
	CodeRouteConflict = "ROUTE_CONFLICT"
	CodeFlowModified  = "FLOW_MODIFIED"
	// CodeFlowNotScheduled: a schedule fired for a flow that is no longer
	// an ACTIVE SCHEDULE flow (disabled or changed since).
	CodeFlowNotScheduled = "FLOW_NOT_SCHEDULED"
)

// RunExists reports that a run ID is taken (RunQueue.Enqueue): derived IDs
// deduplicate deliveries this way.
func RunExists(id string) *Error { return Conflict(CodeRunExists, "run %s exists already", id) }

// RunFinished reports a write to a run that is final already.
func RunFinished(id string, status RunStatus) *Error {
	return Conflict(CodeRunFinished, "run %s is already %s", id, status)
}

// RunClaimed reports a run that another attempt holds.
func RunClaimed(id string) *Error { return Conflict(CodeRunClaimed, "run %s is being executed", id) }

// RunLeaseLost refuses a write of an attempt whose claim is no longer the
// run's: its lease ran out and another attempt claimed the run.
func RunLeaseLost(id string) *Error {
	return Conflict(CodeRunLeaseLost, "run %s was claimed by another attempt", id)
}

// RouteConflict reports a workflow path and method another flow holds.
// The holder may be another project's flow: the message names the route,
// never the flow.
func RouteConflict(method, path string) *Error {
	return Conflict(CodeRouteConflict, "another flow already receives %s requests on webhook path %q", method, path)
}

// FlowModified reports a stale flow version in a write.
func FlowModified(id string) *Error {
	return Conflict(CodeFlowModified, "flow %q was modified by another request: read it again and retry", id)
}

// FlowNotScheduled reports a firing for a flow that is not an active
// schedule flow.
func FlowNotScheduled(id string) *Error {
	return Conflict(CodeFlowNotScheduled, "flow %q is not an active schedule flow", id)
}

// HasCode reports whether err is (or wraps) an *Error with the code.
func HasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsRunExists reports whether err is RunExists.
func IsRunExists(err error) bool { return HasCode(err, CodeRunExists) }

// IsRunFinished reports whether err is RunFinished.
func IsRunFinished(err error) bool { return HasCode(err, CodeRunFinished) }

// IsRunClaimed reports whether err is RunClaimed.
func IsRunClaimed(err error) bool { return HasCode(err, CodeRunClaimed) }

// IsRunLeaseLost reports whether err is RunLeaseLost.
func IsRunLeaseLost(err error) bool { return HasCode(err, CodeRunLeaseLost) }

// IsFlowModified reports whether err is FlowModified.
func IsFlowModified(err error) bool { return HasCode(err, CodeFlowModified) }

// IsFlowNotScheduled reports whether err is FlowNotScheduled.
func IsFlowNotScheduled(err error) bool { return HasCode(err, CodeFlowNotScheduled) }

// IsRouteConflict reports whether err is RouteConflict.
func IsRouteConflict(err error) bool { return HasCode(err, CodeRouteConflict) }
