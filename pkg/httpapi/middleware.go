package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"flowservice/pkg/automation"
)

// requestInfo is what the layers of one request learn about it, shared
// through the context so that the access log, written last, sees the route
// and project found by inner layers.
type requestInfo struct {
	id      string
	route   string
	project automation.Project
	// keyID and role are the authenticated key's (authenticate).
	keyID string
	role  automation.Role
	// flowID and runID are set by the webhook receivers once known.
	flowID, runID string
}

type infoKey struct{}

func withInfo(ctx context.Context, info *requestInfo) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// infoOf returns the request's info; a request that did not pass through
// ServeHTTP (which cannot happen for routed requests) gets a blank one.
func infoOf(ctx context.Context) *requestInfo {
	if info, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{}
}

// RequestID returns the ID of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string { return infoOf(ctx).id }

// projectOf returns the authenticated project of r.
func projectOf(r *http.Request) automation.Project { return infoOf(r.Context()).project }

// maxClientRequestID bounds a client-chosen X-Request-Id, which ends up in
// logs and responses.
const maxClientRequestID = 64

// requestIDFrom returns the client's X-Request-Id when it is short and made
// of safe characters (so that it can correlate with the client's own logs
// and cannot forge log lines), or a fresh random one.
func requestIDFrom(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= maxClientRequestID && safeID(id) {
		return id
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func safeID(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// recorder remembers the status and size of a response for the access log
// and for panic recovery.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// logAccess writes the access line: never headers or bodies, which carry
// keys and credentials.
func logAccess(log *slog.Logger, r *http.Request, rec *recorder, info *requestInfo, start time.Time) {
	if !log.Enabled(r.Context(), slog.LevelInfo) {
		return // the line's attributes cost more than the check
	}
	route := info.route
	if route == "" {
		route = r.URL.Path
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK // net/http's answer for a handler that wrote nothing
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Int64("bytes", rec.bytes),
		slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
		slog.String("requestId", info.id),
	}
	if info.project.ID != "" {
		attrs = append(attrs, slog.String("projectId", info.project.ID))
	}
	if info.flowID != "" {
		attrs = append(attrs, slog.String("flowId", info.flowID))
	}
	if info.runID != "" {
		attrs = append(attrs, slog.String("runId", info.runID))
	}
	log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// recoverPanic turns a panic in a handler into the generic 500, logged with
// the request ID. http.ErrAbortHandler keeps its meaning: abort silently.
func recoverPanic(log *slog.Logger, rec *recorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	log.ErrorContext(r.Context(), "handler panicked", "requestId", RequestID(r.Context()), "panic", fmt.Sprint(v))
	if rec.status == 0 {
		writeError(rec, r, http.StatusInternalServerError, "INTERNAL", "internal error")
	}
}
