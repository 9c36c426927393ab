package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"flowservice/pkg/respbudget"
)

// WithResponseBudget sets the budget the API's answers are cut to
// (respbudget.Default() unless set): Lambda measures an answer as its
// proxy response carries it, and tests use a small budget.
func WithResponseBudget(b respbudget.Budget) APIOption {
	return func(a *API) { a.budget = b }
}

// budgeted wraps the handler of every authenticated route: its answer is
// cut to the budget (respbudget.Budget.Fit), and a GET or HEAD naming a
// part (?part=, offset) answers that part (respbudget.Budget.Part). The
// handler never sees the two parameters. The public routes (the document,
// health, metrics) answer small, fixed things and are not wrapped.
func (a *API) budgeted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req respbudget.Request
		var hasPart bool
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			q := r.URL.Query()
			if req, hasPart = respbudget.Take(q); hasPart {
				inner := *r
				u := *r.URL
				u.RawQuery = q.Encode()
				inner.URL = &u
				r = &inner
			}
		}
		buf := &answerBuffer{header: w.Header()}
		next.ServeHTTP(buf, r)
		status, body := buf.status, buf.body.Bytes()
		if status == 0 {
			status = http.StatusOK
		}
		orig := body
		if isJSONAnswer(w.Header()) {
			body = respbudget.UnescapeHTML(body)
		}
		switch {
		case hasPart && status == http.StatusOK:
			if !isJSONAnswer(w.Header()) {
				a.partError(w, r, &respbudget.ParamError{Param: respbudget.PartParam, Message: "this answer is not JSON and has no parts"})
				return
			}
			sel, _, err := a.budget.Part(w.Header(), body, r.URL.Path, req)
			var tl *respbudget.TooLargeError
			if errors.As(err, &tl) {
				a.tooLarge(w, r, tl.Size)
				return
			} else if err != nil {
				a.partError(w, r, err)
				return
			}
			body = sel
			w.Header().Set("Content-Type", respbudget.PartMediaType)
		case status < 300 && isJSONAnswer(w.Header()):
			var ok bool
			var size int
			if body, size, ok = a.budget.Fit(w.Header(), body, hrefPath(w, r)); !ok {
				a.tooLarge(w, r, size)
				return
			}
		default:
			if size := a.budget.Measure(w.Header(), body); size > a.budget.Bytes {
				a.tooLarge(w, r, size)
				return
			}
		}
		if !bytes.Equal(body, orig) {
			w.Header().Del("Content-Length")
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
}

// answerBuffer holds a handler's answer until it is fitted. The header is
// the real writer's: nothing is sent before WriteHeader.
type answerBuffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *answerBuffer) Header() http.Header { return b.header }

func (b *answerBuffer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *answerBuffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// isJSONAnswer tells a JSON answer sent as is (not compressed).
func isJSONAnswer(h http.Header) bool {
	ct := strings.ToLower(h.Get("Content-Type"))
	return (strings.HasPrefix(ct, "application/json") || strings.Contains(ct, "+json")) && h.Get("Content-Encoding") == ""
}

// hrefPath is the path a marker's href names: the resource's own GET, so
// for a created resource (POST with Location: a retried run) its location.
func hrefPath(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if u, err := url.Parse(w.Header().Get("Location")); err == nil && u.Path != "" && u.Host == "" {
			return u.Path
		}
	}
	return r.URL.Path
}

// partError answers a part or offset that names nothing: 400 naming it.
func (a *API) partError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *respbudget.ParamError
	if !errors.As(err, &pe) {
		a.fail(w, r, err)
		return
	}
	clearAnswerHeaders(w.Header())
	writeError(w, r, http.StatusBadRequest, "INVALID_PARAMETER", pe.Error())
}

// tooLarge answers 500 RESPONSE_TOO_LARGE for an answer that cannot be cut
// to the budget (one not JSON, or without parts left to cut): on Lambda,
// an answer over the limit would fail the invocation and answer 502.
func (a *API) tooLarge(w http.ResponseWriter, r *http.Request, size int) {
	a.log.ErrorContext(r.Context(), "answer over the budget", "requestId", RequestID(r.Context()),
		"bytes", size, "budget", a.budget.Bytes)
	clearAnswerHeaders(w.Header())
	writeError(w, r, http.StatusInternalServerError, "RESPONSE_TOO_LARGE",
		"the answer is "+strconv.Itoa(size)+" bytes, over the budget of "+strconv.Itoa(a.budget.Bytes)+" bytes, and cannot be cut into parts")
}

// clearAnswerHeaders drops what the handler said about the answer it
// wrote, before an error envelope replaces it.
func clearAnswerHeaders(h http.Header) {
	for _, k := range []string{"Content-Length", "Content-Encoding", "Content-Disposition", "Location", "ETag", "Last-Modified"} {
		h.Del(k)
	}
}
