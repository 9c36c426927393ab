package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"flowservice/pkg/automation"
)

// Kinds of failure that belong to HTTP rather than to the domain.
var (
	errUnsupportedMedia = errors.New("unsupported media type") // 415
	errTooLarge         = errors.New("body too large")         // 413
	errTooSlow          = errors.New("body too slow")          // 408
)

// statusOf maps the kind of an *automation.Error to its status. It is the
// one table of every surface: the API, both receivers and the dashboard
// (through StatusOf).
var statusOf = map[error]int{
	automation.ErrInvalid:        http.StatusBadRequest,
	automation.ErrUnauthorized:   http.StatusUnauthorized,
	automation.ErrForbidden:      http.StatusForbidden,
	automation.ErrNotFound:       http.StatusNotFound,
	automation.ErrConflict:       http.StatusConflict,
	automation.ErrUnavailable:    http.StatusServiceUnavailable,
	errUnsupportedMedia:          http.StatusUnsupportedMediaType,
	errTooLarge:                  http.StatusRequestEntityTooLarge,
	errTooSlow:                   http.StatusRequestTimeout,
	automation.ErrLoop:           http.StatusLoopDetected,
	automation.ErrRateLimited:    http.StatusTooManyRequests,
	automation.ErrNotImplemented: http.StatusNotImplemented,
}

// StatusOf tells the HTTP status of err's kind when err is an
// *automation.Error of a known kind. Kinds are compared by identity, as
// every *automation.Error carries one of the sentinels as Kind.
func StatusOf(err error) (int, bool) {
	var e *automation.Error
	if !errors.As(err, &e) {
		return 0, false
	}
	status, ok := statusOf[e.Kind]
	return status, ok
}

// fail writes the error envelope for err. Only *automation.Error text
// reaches clients; anything else is logged with the request ID and answered
// with a bare 500, so internals never leak.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var rl *automation.RateLimited // a retry or replay past runsPerMinute
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(rl.RetryAfter.Seconds())))))
	}
	var e *automation.Error
	if errors.As(err, &e) {
		if status, ok := statusOf[e.Kind]; ok {
			switch status {
			case http.StatusUnauthorized:
				w.Header().Set("WWW-Authenticate", "Bearer")
			case http.StatusServiceUnavailable:
				// The cause (disk full, read-only, busy) is for the
				// operator, not the client.
				a.log.WarnContext(r.Context(), "request unavailable", "requestId", RequestID(r.Context()), "err", err)
				w.Header().Set("Retry-After", retryAfterSeconds)
			}
			writeError(w, r, status, e.Code, e.Message)
			return
		}
	}
	a.log.ErrorContext(r.Context(), "request failed", "requestId", RequestID(r.Context()), "err", err)
	writeError(w, r, http.StatusInternalServerError, "INTERNAL", "internal error")
}

// errorBody is the error envelope of every failed request.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId"`
}

// writeError writes the error envelope with the request's ID.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, errorBody{errorDetail{Code: code, Message: msg, RequestID: RequestID(r.Context())}})
}

// writeJSON encodes v as the response. Encoding first, into a buffer, means
// a value that cannot be encoded becomes a clean 500 instead of a truncated
// 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// <, > and & as themselves, not as 6-byte escapes: a run holding HTML
	// would otherwise answer up to six times its size (Lambda caps answers
	// at 6 MB). The answer is application/json with nosniff, so no
	// browser renders it as HTML.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"INTERNAL","message":"internal error","requestId":""}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeJSONList answers 200 with a page whose items are JSON already (run
// summaries as stored): the bytes writeJSON would write for the
// List[automation.Run] they encode, but without encoding/json, which
// checks and compacts every json.Marshaler's output again, a second pass
// over each byte of the page.
func writeJSONList(w http.ResponseWriter, l automation.List[json.RawMessage]) {
	size := len(`{"data":[],"cursor":null,"hasMore":false}`+"\n") + len(l.Data)
	for _, it := range l.Data {
		size += len(it)
	}
	cursor := []byte("null")
	if l.Cursor != nil {
		// A sealed cursor is URL-safe base64; json.Marshal quotes any string.
		cursor, _ = json.Marshal(*l.Cursor)
		size += len(cursor)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, `{"data":[`...)
	for i, it := range l.Data {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it...)
	}
	buf = append(append(append(buf, `],"cursor":`...), cursor...), `,"hasMore":`...)
	buf = append(strconv.AppendBool(buf, l.HasMore), "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
}

// writeNoContent answers 204.
func writeNoContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
