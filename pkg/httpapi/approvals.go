package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
	"flowservice/pkg/respbudget"
)

// A person in the loop (docs/api.md, "Approvals"): the approvals inbox and
// decisions of the management API, the public decision page of a link, and
// the callback URL of a WAIT for a callback. The page and the callback are
// public: the token in the path is the credential, and an unknown, void or
// expired one is the same 404 that tells nothing.

func (a *API) approvalRoutes() []route {
	return []route{
		{pattern: "GET /api/v1/approvals", handler: a.listApprovals},
		{pattern: "POST /api/v1/runs/{runId}/approvals/{step}", handler: a.decideApproval},
		{pattern: "POST /api/v1/callbacks/{token}", handler: a.callback, public: true},
		{pattern: "GET /approvals/{token}", handler: a.approvalPage, public: true},
		{pattern: "POST /approvals/{token}", handler: a.approvalPost, public: true},
	}
}

// NewLinks serves the public routes of approvals and callbacks alone (the
// decision page of a link, a WAIT's callback URL), for a server of the
// engine URL that is not the management API: the AWS webhook function,
// which the engine URL's API Gateway fronts.
func NewLinks(svc *automation.Service, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &API{svc: svc, log: log, mux: http.NewServeMux(), patterns: map[string]bool{}, budget: respbudget.Default(),
		publicPrefix: func(*http.Request) string { return "" }}
	for _, rt := range a.approvalRoutes() {
		if rt.public {
			a.mux.Handle(rt.pattern, rt.handler)
			a.patterns[rt.pattern] = true
		}
	}
	return a
}

func (a *API) listApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := a.svc.ListApprovals(r.Context(), projectOf(r), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// decision is the answer of a decision: the approval as it stands.
type decision struct {
	RunID     string                `json:"runId"`
	Step      string                `json:"step"`
	Status    string                `json:"status"`
	Decision  string                `json:"decision,omitempty"`
	Values    any                   `json:"values,omitempty"`
	Decisions []automation.Decision `json:"decisions"`
}

func decisionOf(w automation.Waitpoint) decision {
	ds := w.Decisions
	if ds == nil {
		ds = []automation.Decision{}
	}
	return decision{RunID: w.RunID, Step: w.Step, Status: w.Status, Decision: w.Decision, Values: w.Values, Decisions: ds}
}

// failDecision answers an error of a decision; ALREADY_DECIDED carries the
// decision recorded, so that the loser of a race learns the winner's.
func (a *API) failDecision(w http.ResponseWriter, r *http.Request, wp automation.Waitpoint, err error) {
	var ad *automation.AlreadyDecided
	if errors.As(err, &ad) {
		d := decisionOf(ad.Waitpoint)
		if ad.Waitpoint.Kind == automation.WaitCallback {
			d.Decisions = nil
		}
		writeJSON(w, http.StatusConflict, struct {
			Error    errorDetail `json:"error"`
			Decision decision    `json:"decision"`
		}{errorDetail{Code: "ALREADY_DECIDED", Message: ad.Error(), RequestID: RequestID(r.Context())}, d})
		return
	}
	a.fail(w, r, err)
}

func (a *API) decideApproval(w http.ResponseWriter, r *http.Request) {
	var in automation.ApprovalAnswer
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	info := infoOf(r.Context())
	pr := automation.Principal{Project: info.project, KeyID: info.keyID, Role: info.role}
	wp, err := a.svc.DecideApproval(r.Context(), pr, r.PathValue("runId"), r.PathValue("step"), in)
	if err != nil {
		a.failDecision(w, r, wp, err)
		return
	}
	writeJSON(w, http.StatusOK, decisionOf(wp))
}

// MaxCallbackBytes bounds a callback's body, as a webhook's.
const MaxCallbackBytes = MaxBodyBytes

// callback answers a WAIT for a callback: the first POST resumes the run.
func (a *API) callback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCallbackBytes))
	if err != nil {
		writeError(w, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "the body is over the limit of a callback")
		return
	}
	cb := automation.Callback{Body: callbackBody(r.Header.Get("Content-Type"), body), Headers: callbackHeaders(r.Header)}
	wp, err := a.svc.CallbackByToken(r.Context(), r.PathValue("token"), cb)
	if err != nil {
		a.failDecision(w, r, wp, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runId": wp.RunID, "status": "RESUMED"})
}

// callbackBody is a callback's body as the step outputs it: JSON decoded
// (also without a Content-Type), a form as an object, anything else text.
func callbackBody(contentType string, body []byte) any {
	mt, _, _ := mime.ParseMediaType(contentType)
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	switch {
	case mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json"):
		var v any
		if json.Unmarshal(body, &v) == nil {
			return v
		}
	case mt == "application/x-www-form-urlencoded":
		if q, err := parseQuery(string(body)); err == nil {
			return q
		}
	}
	return string(body)
}

func parseQuery(s string) (map[string]any, error) {
	r, err := http.NewRequest(http.MethodGet, "/?"+s, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range r.URL.Query() {
		out[k] = strings.Join(v, ",")
	}
	return out, nil
}

// callbackHeaders are the request's headers as the step outputs them,
// lower case, without the caller's credentials.
func callbackHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		k = strings.ToLower(k)
		switch k {
		case "authorization", "cookie", "proxy-authorization":
			continue
		}
		out[k] = strings.Join(v, ", ")
	}
	return out
}

// The decision page: server-rendered HTML with the dashboard's style
// sheet, no script at all, a plain form that works without JavaScript.

var approvalPageTmpl = template.Must(template.New("approval").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Found}}{{.Title}}{{else}}Not found{{end}}</title><link rel="stylesheet" href="/ui/static/style.css"></head>
<body><main class="approval">
{{- if not .Found}}
<h1>Not found</h1><p>This link does not exist.</p>
{{- else}}
<h1>{{.Title}}</h1>
<p class="muted">{{.FlowName}} · expires {{when .ExpiresAt}}</p>
{{- if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
{{- if .Decided}}
<p>Decided: <strong>{{.Decision}}</strong>.</p>
{{- else if .Thanks}}
<p>Your answer is recorded; {{.Needed}} more approval(s) are needed.</p>
{{- else}}
<form method="post">
{{- range .Fields}}
<p><label for="f-{{.Name}}">{{if .Title}}{{.Title}}{{else}}{{.Name}}{{end}}{{if .Required}} *{{end}}</label>
{{- if .Enum}}
<select id="f-{{.Name}}" name="{{.Name}}">{{if not .Required}}<option value=""></option>{{end}}{{range .Enum}}<option>{{.}}</option>{{end}}</select>
{{- else if eq .Type "boolean"}}
<input type="checkbox" id="f-{{.Name}}" name="{{.Name}}" value="true">
{{- else if or (eq .Type "number") (eq .Type "integer")}}
<input type="number" id="f-{{.Name}}" name="{{.Name}}"{{if eq .Type "number"}} step="any"{{end}}{{if .Required}} required{{end}}>
{{- else}}
<input type="text" id="f-{{.Name}}" name="{{.Name}}"{{if .Required}} required{{end}}>
{{- end}}
{{- if .Description}}<br><small>{{.Description}}</small>{{end}}</p>
{{- end}}
<p><button type="submit" name="decision" value="approve"{{if eq .Preset "reject"}} class="secondary"{{end}}>Approve</button>
<button type="submit" name="decision" value="reject" formnovalidate{{if ne .Preset "reject"}} class="secondary"{{end}}>Reject</button></p>
</form>
{{- end}}
{{- end}}
</main></body></html>
`))

type approvalPageData struct {
	Found           bool
	Title, FlowName string
	ExpiresAt       time.Time
	Decided         bool
	Decision        string
	Fields          []flowdef.FormField
	Error, Preset   string
	Thanks          bool
	Needed          int
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the token is in the path
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

func (a *API) renderApproval(w http.ResponseWriter, status int, wp automation.Waitpoint, d approvalPageData) {
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if wp.RunID != "" {
		d.Found, d.Title, d.FlowName, d.ExpiresAt = true, wp.Title, wp.FlowName, wp.ExpiresAt
		d.Decided, d.Decision = wp.Decided(), wp.Decision
		if fs, err := flowdef.ParseFormSchema(wp.Form); len(wp.Form) > 0 && err == nil {
			d.Fields = fs.Fields
		}
	}
	var buf bytes.Buffer
	if err := approvalPageTmpl.Execute(&buf, d); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("internal error")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (a *API) approvalPage(w http.ResponseWriter, r *http.Request) {
	wp, err := a.svc.ApprovalByToken(r.Context(), r.PathValue("token"))
	if err != nil {
		a.approvalError(w, r, err)
		return
	}
	a.renderApproval(w, http.StatusOK, wp, approvalPageData{Preset: r.URL.Query().Get("decision")})
}

// approvalError is a page for a missing link (404 that tells nothing) or
// a JSON error for anything else.
func (a *API) approvalError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, automation.ErrNotFound) {
		a.renderApproval(w, http.StatusNotFound, automation.Waitpoint{}, approvalPageData{})
		return
	}
	a.fail(w, r, err)
}

// approvalPost decides through a link: an HTML form (the page's), or JSON
// {"decision", "values"} from a script; each is answered in its kind.
func (a *API) approvalPost(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" {
		var in automation.ApprovalAnswer
		if err := decode(w, r, &in); err != nil {
			a.fail(w, r, err)
			return
		}
		wp, err := a.svc.DecideByToken(r.Context(), token, in)
		if err != nil {
			a.failDecision(w, r, wp, err)
			return
		}
		writeJSON(w, http.StatusOK, decisionOf(wp))
		return
	}
	wp, err := a.svc.ApprovalByToken(r.Context(), token)
	if err != nil {
		a.approvalError(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeError(w, r, http.StatusBadRequest, "VALIDATION_ERROR", "the form could not be read")
		return
	}
	in := automation.ApprovalAnswer{Decision: r.PostForm.Get("decision")}
	text := map[string]string{}
	for k, v := range r.PostForm {
		if k != "decision" && len(v) > 0 {
			text[k] = v[0]
		}
	}
	if len(wp.Form) > 0 {
		fs, err := flowdef.ParseFormSchema(wp.Form)
		if err == nil {
			in.Values, err = fs.FromText(text)
		}
		if err != nil {
			a.renderApproval(w, http.StatusBadRequest, wp, approvalPageData{Error: err.Error()})
			return
		}
		if in.Decision == "reject" && len(text) == 0 {
			in.Values = nil
		}
	}
	got, err := a.svc.DecideByToken(r.Context(), token, in)
	var ad *automation.AlreadyDecided
	var ae *automation.Error
	switch {
	case errors.As(err, &ad):
		a.renderApproval(w, http.StatusConflict, ad.Waitpoint, approvalPageData{Error: "This was decided already."})
	case errors.Is(err, automation.ErrNotFound):
		a.approvalError(w, r, err)
	case errors.As(err, &ae) && errors.Is(err, automation.ErrInvalid):
		a.renderApproval(w, http.StatusBadRequest, wp, approvalPageData{Error: ae.Message})
	case err != nil:
		a.fail(w, r, err)
	default:
		needed := 0
		if !got.Decided() {
			n := 0
			for _, d := range got.Decisions {
				if d.Decision == automation.DecisionApproved {
					n++
				}
			}
			needed = max(got.Approvals, 1) - n
		}
		a.renderApproval(w, http.StatusOK, got, approvalPageData{Thanks: true, Needed: needed})
	}
}
