package automation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"flowservice/pkg/flowdef"
)

// A person in the loop (docs/flows.md, "APPROVAL" and "WAIT"): a waitpoint
// is what an APPROVAL step, or a WAIT for a callback, waits for. The step's
// first execution opens it (OpenWaitpoint: a record keyed by run and step,
// with the hash of a fresh 256-bit token), runs its notify steps with the
// links in scope, and parks the run until the waitpoint's expiry, as a WAIT
// parks it. An answer (a link, the API, the dashboard, a callback) is one
// conditional write of the record (WaitpointStore.UpdateWaitpoint): the
// first deciding answer is recorded and, in the same write, the run is made
// due; every later one finds the record decided and gets ALREADY_DECIDED
// with the recorded decision. The attempt that resumes the run executes the
// step again, reads the decision (ResolveWaitpoint) and goes on.
//
// An answer may come before the run is parked (its notify steps still run):
// the record holds it, and the attempt, once it parked the run, reads the
// record again (recheckWaitpoints) and makes the run due at once. Whichever
// of the two writes comes second sees the other, so no answer is left
// behind. A timeout is a write too (PENDING → DECIDED "timeout"), made by
// the attempt that resumes at the expiry, conditional like an answer, so
// that an answer just before the expiry and the timeout never both win.

// WaitpointKind says what a waitpoint waits for.
type WaitpointKind string

// Waitpoint kinds.
const (
	WaitApproval WaitpointKind = "APPROVAL"
	WaitCallback WaitpointKind = "CALLBACK"
)

// Waiting reasons of a run parked on a waitpoint (Run.WaitingFor).
const (
	WaitingApproval WaitReason = "APPROVAL"
	WaitingCallback WaitReason = "CALLBACK"
)

// Waitpoint states.
const (
	WaitpointPending = "PENDING"
	WaitpointDecided = "DECIDED"
)

// Decisions of an APPROVAL.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
	DecisionTimeout  = "timeout"
)

// How an answer came.
const (
	ViaLink      = "link"
	ViaDashboard = "dashboard"
	ViaAPI       = "api"
)

// Waitpoint is the stored state of one APPROVAL step, or WAIT for a
// callback, of a run: keyed by RunID and Step (the step's journal key).
type Waitpoint struct {
	Project   string          `json:"project"`
	RunID     string          `json:"runId"`
	FlowID    string          `json:"flowId"`
	FlowName  string          `json:"flowName"`
	Step      string          `json:"step"`
	Kind      WaitpointKind   `json:"kind"`
	Title     string          `json:"title,omitempty"`
	Form      json.RawMessage `json:"form,omitempty"`
	Approvals int             `json:"approvals,omitempty"`
	Roles     []string        `json:"roles,omitempty"`
	// Emails are the people (lower-case) who may decide from the API or
	// the dashboard besides Roles (approvers.emails).
	Emails []string `json:"emails,omitempty"`
	// Attempt is the claim of the run that opened the waitpoint: the
	// token belongs to it, and an attempt after a crash opens it anew.
	Attempt   int        `json:"attempt"`
	Status    string     `json:"status"`
	Decision  string     `json:"decision,omitempty"`
	Values    any        `json:"values,omitempty"`
	Decisions []Decision `json:"decisions"`
	// Callback is what the first POST to a callback URL brought.
	Callback  *Callback `json:"callback,omitempty"`
	Created   time.Time `json:"created"`
	ExpiresAt time.Time `json:"expiresAt"`
	// TokenHash is the SHA-256 of the link's token; the token itself is
	// never stored.
	TokenHash string `json:"-"`
	// Link is the public page of a token just made, set by the write that
	// opens the waitpoint with it, and never stored: the store hands it to
	// its Outbox, whose approval.requested event carries it as url.
	Link string `json:"-"`
}

// Decision is one answer to an APPROVAL.
type Decision struct {
	By       string    `json:"by"`
	Via      string    `json:"via"`
	Decision string    `json:"decision"`
	Values   any       `json:"values,omitempty"`
	At       time.Time `json:"at"`
}

// Callback is the request that answered a WAIT for a callback.
type Callback struct {
	Body       any               `json:"body"`
	Headers    map[string]string `json:"headers"`
	ReceivedAt time.Time         `json:"receivedAt"`
}

// Decided reports whether w no longer waits.
func (w Waitpoint) Decided() bool { return w.Status == WaitpointDecided }

// ApprovalItem is an approval as the API lists it.
type ApprovalItem struct {
	RunID     string          `json:"runId"`
	FlowID    string          `json:"flowId"`
	FlowName  string          `json:"flowName"`
	Step      string          `json:"step"`
	Title     string          `json:"title"`
	Form      json.RawMessage `json:"form,omitempty"`
	Approvals int             `json:"approvals"`
	Status    string          `json:"status"`
	Decision  string          `json:"decision,omitempty"`
	Decisions []Decision      `json:"decisions"`
	Created   time.Time       `json:"created"`
	ExpiresAt time.Time       `json:"expiresAt"`
	URL       string          `json:"url,omitempty"` // approval.requested events only
	// ValuesOmitted says an event's payload left out the decisions'
	// values, to stay within its bound (alerts.MaxApprovalEventBytes).
	ValuesOmitted bool `json:"valuesOmitted,omitempty"`
}

// Item is w as the API lists it.
func (w Waitpoint) Item() ApprovalItem {
	ds := w.Decisions
	if ds == nil {
		ds = []Decision{}
	}
	return ApprovalItem{RunID: w.RunID, FlowID: w.FlowID, FlowName: w.FlowName, Step: w.Step, Title: w.Title,
		Form: w.Form, Approvals: max(w.Approvals, 1), Status: w.Status, Decision: w.Decision, Decisions: ds,
		Created: w.Created, ExpiresAt: w.ExpiresAt}
}

// Outcome is the output of the step once w is decided: for an APPROVAL
// {"decision", "values", "decisions"}; for a callback {"body", "headers",
// "receivedAt"}, or {"timedOut": true}.
func (w Waitpoint) Outcome() map[string]any {
	if w.Kind == WaitCallback {
		if w.Callback == nil {
			return map[string]any{"timedOut": true}
		}
		return map[string]any{"body": w.Callback.Body, "headers": w.Callback.Headers,
			"receivedAt": w.Callback.ReceivedAt.UTC().Format(time.RFC3339Nano)}
	}
	values := w.Values
	if values == nil {
		values = map[string]any{}
	}
	ds := make([]any, 0, len(w.Decisions))
	for _, d := range w.Decisions {
		m := map[string]any{"by": d.By, "via": d.Via, "decision": d.Decision, "at": d.At.UTC().Format(time.RFC3339Nano)}
		if d.Values != nil {
			m["values"] = d.Values
		}
		ds = append(ds, m)
	}
	return map[string]any{"decision": w.Decision, "values": values, "decisions": ds}
}

// WaitpointStore keeps waitpoints (RunRuntime.Waitpoints; nil where the
// backend has none, and then APPROVAL and WAIT for a callback fail their
// run with a message).
type WaitpointStore interface {
	// UpdateWaitpoint reads the waitpoint of the project's run and step
	// (found false when there is none: w is zero), calls change, and
	// writes what change left in w, atomically: a concurrent write makes
	// it read again and call change again. When change returns wake, the
	// run is made due now in the same atomic write where the store is
	// also the run queue (flowd: its queue entry, kept due even while an
	// attempt holds it, as callwake.go does); elsewhere the Service wakes
	// it after the write (Waker). An error from change is returned as is,
	// and nothing is written. A token hash held by another waitpoint is
	// ErrConflict. With its alert event (ports.go): the Outbox's
	// WaitpointChanged given the waitpoint as read (nil when none) and as
	// change left it, Link included (approval.requested carries it; it is
	// never stored), and for nothing else.
	UpdateWaitpoint(ctx context.Context, project, runID, step string,
		change func(w *Waitpoint, found bool) (wake bool, err error)) (Waitpoint, error)
	// Waitpoint reads one; none (or another project's) wraps ErrNotFound.
	Waitpoint(ctx context.Context, project, runID, step string) (Waitpoint, error)
	// WaitpointByToken finds a waitpoint by its token's hash; none wraps
	// ErrNotFound.
	WaitpointByToken(ctx context.Context, tokenHash string) (Waitpoint, error)
	// ListWaitpoints pages through a project's approvals (kind APPROVAL),
	// newest first; q.Status is PENDING or DECIDED.
	ListWaitpoints(ctx context.Context, project string, q ListQuery) (Page[Waitpoint], error)
}

// Waitpoints is what the executor asks of the domain for APPROVAL steps and
// WAIT for a callback (ExecEnv.Waitpoints).
type Waitpoints interface {
	// OpenWaitpoint opens the waitpoint spec describes, or finds it: a
	// decided one (an answer came while an earlier attempt ran its notify
	// steps) is returned as it is, with no token; a pending one opened by
	// an earlier attempt gets a new token (the earlier links are void).
	OpenWaitpoint(ctx context.Context, spec WaitpointSpec) (w Waitpoint, links WaitpointLinks, err error)
	// ResolveWaitpoint reads the waitpoint of a resumed step: decided, or
	// past its expiry (then decided "timeout" now, unless an answer won
	// first), or still pending.
	ResolveWaitpoint(ctx context.Context, project, runID, step string) (Waitpoint, error)
}

// WaitpointSpec is what a step's execution knows of its waitpoint.
type WaitpointSpec struct {
	Project, RunID, FlowID, FlowName, Step string
	Kind                                   WaitpointKind
	Title                                  string
	Form                                   json.RawMessage
	Approvals                              int
	Roles, Emails                          []string
	Timeout                                time.Duration
	Attempt                                int
}

// WaitpointLinks are the URLs of a waitpoint's token, for its notify steps.
type WaitpointLinks struct {
	URL, ApproveURL, RejectURL, CallbackURL string
}

// NewWaitpointToken is a fresh 256-bit token, URL-safe, and its hash.
func NewWaitpointToken() (token, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, HashWaitpointToken(token)
}

// HashWaitpointToken is the stored form of a token.
func HashWaitpointToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// validTokenShape rejects what cannot be a token before any store read.
func validTokenShape(t string) bool {
	if len(t) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(t)
	return err == nil
}

func (s *RunService) waitpoints() (WaitpointStore, error) {
	if s.rt == nil || s.rt.Waitpoints == nil {
		return nil, &Error{Kind: ErrUnavailable, Code: "NOT_AVAILABLE", Message: "approvals and callbacks are not available in this deployment"}
	}
	return s.rt.Waitpoints, nil
}

// OpenWaitpoint implements Waitpoints.
func (s *RunService) OpenWaitpoint(ctx context.Context, spec WaitpointSpec) (Waitpoint, WaitpointLinks, error) {
	ws, err := s.waitpoints()
	if err != nil {
		return Waitpoint{}, WaitpointLinks{}, err
	}
	token, hash := NewWaitpointToken()
	base := s.flows.engineURL
	links := WaitpointLinks{URL: base + "/approvals/" + token}
	if spec.Kind == WaitCallback {
		links = WaitpointLinks{CallbackURL: base + "/api/v1/callbacks/" + token}
	} else {
		links.ApproveURL, links.RejectURL = links.URL+"?decision=approve", links.URL+"?decision=reject"
	}
	now := s.clock()
	var opened bool
	w, err := ws.UpdateWaitpoint(ctx, spec.Project, spec.RunID, spec.Step, func(w *Waitpoint, found bool) (bool, error) {
		opened = false
		if found && w.Decided() {
			return false, errUnchanged
		}
		if !found {
			*w = Waitpoint{Project: spec.Project, RunID: spec.RunID, FlowID: spec.FlowID, FlowName: spec.FlowName,
				Step: spec.Step, Kind: spec.Kind, Status: WaitpointPending, Decisions: []Decision{},
				Created: now, ExpiresAt: now.Add(spec.Timeout).Truncate(time.Millisecond)}
		}
		// A new attempt asks again: its own token, its title and form as
		// they render now; answers already given stand.
		w.Title, w.Form, w.Approvals, w.Roles, w.Emails, w.Attempt = spec.Title, spec.Form, spec.Approvals, spec.Roles, spec.Emails, spec.Attempt
		w.TokenHash = hash
		if spec.Kind == WaitApproval {
			w.Link = links.URL
		}
		opened = true
		return false, nil
	})
	if errors.Is(err, errUnchanged) {
		w, err = s.readWaitpoint(ctx, ws, spec.Project, spec.RunID, spec.Step)
		return w, WaitpointLinks{}, err
	}
	if err != nil {
		return Waitpoint{}, WaitpointLinks{}, wrap("open waitpoint", err)
	}
	if !opened {
		return w, WaitpointLinks{}, nil
	}
	return w, links, nil
}

// errUnchanged ends an UpdateWaitpoint whose change had nothing to write.
var errUnchanged = errors.New("unchanged")

func (s *RunService) readWaitpoint(ctx context.Context, ws WaitpointStore, project, runID, step string) (Waitpoint, error) {
	w, err := ws.Waitpoint(ctx, project, runID, step)
	if IsNotFound(err) {
		return w, NotFound("approval", runID+"/"+step)
	}
	return w, err
}

// ResolveWaitpoint implements Waitpoints.
func (s *RunService) ResolveWaitpoint(ctx context.Context, project, runID, step string) (Waitpoint, error) {
	ws, err := s.waitpoints()
	if err != nil {
		return Waitpoint{}, err
	}
	now := s.clock()
	var out Waitpoint
	w, err := ws.UpdateWaitpoint(ctx, project, runID, step, func(w *Waitpoint, found bool) (bool, error) {
		if !found {
			return false, NotFound("approval", runID+"/"+step)
		}
		if w.Decided() || now.Before(w.ExpiresAt) {
			out = *w
			return false, errUnchanged
		}
		w.Status, w.Decision, w.TokenHash = WaitpointDecided, DecisionTimeout, ""
		return false, nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return out, nil
	case err != nil:
		return Waitpoint{}, wrap("resolve waitpoint", err)
	}
	return w, nil
}

// ApprovalAnswer is one answer to an APPROVAL: "approve" or "reject", the form's
// values, and who gives it.
type ApprovalAnswer struct {
	Decision string         `json:"decision"`
	Values   map[string]any `json:"values"`
	By       string         `json:"-"`
	Via      string         `json:"-"`
	Role     Role           `json:"-"` // API and dashboard: the decider's role
	Email    string         `json:"-"` // API and dashboard: the decider's, when a person
}

// AlreadyDecided is the 409 ALREADY_DECIDED of an answer that came after
// the decision, carrying the decision recorded.
type AlreadyDecided struct {
	Err       *Error
	Waitpoint Waitpoint
}

func (e *AlreadyDecided) Error() string { return e.Err.Message }
func (e *AlreadyDecided) Unwrap() error { return e.Err }

func alreadyDecided(w Waitpoint) error {
	what := "this approval was decided: " + w.Decision
	if w.Kind == WaitCallback {
		what = "this callback was answered already"
	}
	return &AlreadyDecided{Err: Conflict("ALREADY_DECIDED", "%s", what), Waitpoint: w}
}

// ApprovalByToken is the approval of a link, for its page: a token
// unknown, void or expired is the same ErrNotFound.
func (s *RunService) ApprovalByToken(ctx context.Context, token string) (Waitpoint, error) {
	ws, err := s.waitpoints()
	if err != nil {
		return Waitpoint{}, err
	}
	gone := NotFound("approval", "")
	if !validTokenShape(token) {
		return Waitpoint{}, gone
	}
	w, err := ws.WaitpointByToken(ctx, HashWaitpointToken(token))
	if IsNotFound(err) || err == nil && (w.Kind != WaitApproval || w.Decision == DecisionTimeout ||
		!w.Decided() && !s.clock().Before(w.ExpiresAt)) {
		return Waitpoint{}, gone
	}
	if err != nil {
		return Waitpoint{}, wrap("read approval", err)
	}
	return w, nil
}

// DecideByToken answers an approval through its link: one decider.
func (s *RunService) DecideByToken(ctx context.Context, token string, a ApprovalAnswer) (Waitpoint, error) {
	w, err := s.ApprovalByToken(ctx, token)
	if err != nil {
		return Waitpoint{}, err
	}
	a.By, a.Via, a.Role = "link", ViaLink, ""
	return s.decide(ctx, w.Project, w.RunID, w.Step, HashWaitpointToken(token), a)
}

// DecideApproval answers an approval from the API or the dashboard, as the
// principal pr. A person (a session, or a personal key: pr.UserID) is one
// decider by their email, however many keys or sessions they answer
// from; a project key is one decider by its ID.
func (s *RunService) DecideApproval(ctx context.Context, pr Principal, runID, step string, a ApprovalAnswer) (Waitpoint, error) {
	if !pr.Role.Can(PermOperate) {
		return Waitpoint{}, Forbidden("FORBIDDEN", "the %s role may not decide approvals (operator, editor or admin may)", pr.Role)
	}
	a.Role, a.Email = pr.Role, ""
	if pr.UserID == "" && s.projects != nil {
		uid, email, err := s.projects.personOfKey(ctx, pr.Project.ID, pr.KeyID)
		if err != nil {
			return Waitpoint{}, err
		}
		pr.UserID, pr.Email = uid, email
	}
	switch {
	case pr.UserID != "" && pr.Email != "":
		a.By, a.Email = strings.ToLower(pr.Email), strings.ToLower(pr.Email)
	case a.By == "":
		a.By = "key:" + pr.KeyID
	}
	if a.Via == "" {
		a.Via = ViaAPI
	}
	return s.decide(ctx, pr.Project.ID, runID, step, "", a)
}

// decide records answer a to the approval of (runID, step); tokenHash,
// when set, is the link's, which must still be the waitpoint's.
func (s *RunService) decide(ctx context.Context, project, runID, step, tokenHash string, a ApprovalAnswer) (Waitpoint, error) {
	ws, err := s.waitpoints()
	if err != nil {
		return Waitpoint{}, err
	}
	var verdict string
	switch a.Decision {
	case "approve":
		verdict = DecisionApproved
	case "reject":
		verdict = DecisionRejected
	default:
		return Waitpoint{}, Invalid(`decision %q: use "approve" or "reject"`, ClipID(a.Decision))
	}
	now := s.clock()
	w, err := ws.UpdateWaitpoint(ctx, project, runID, step, func(w *Waitpoint, found bool) (bool, error) {
		if !found || w.Kind != WaitApproval || tokenHash != "" && w.TokenHash != tokenHash && !w.Decided() {
			return false, NotFound("approval", runID+"/"+step)
		}
		if w.Decided() {
			if w.Decision == DecisionTimeout {
				return false, NotFound("approval", runID+"/"+step)
			}
			return false, alreadyDecided(*w)
		}
		if !now.Before(w.ExpiresAt) {
			return false, NotFound("approval", runID+"/"+step)
		}
		if a.Role != "" && !mayDecide(*w, a) {
			return false, Forbidden("FORBIDDEN", "%s", notApprover(*w, a))
		}
		if slices.ContainsFunc(w.Decisions, func(d Decision) bool { return d.By == a.By }) {
			return false, Conflict("ALREADY_ANSWERED", "%s answered this approval already; it needs %d distinct deciders", a.By, w.Approvals)
		}
		values, err := checkValues(w.Form, a.Values, verdict)
		if err != nil {
			return false, err
		}
		w.Decisions = append(w.Decisions, Decision{By: a.By, Via: a.Via, Decision: verdict, Values: values, At: now})
		approvals := 0
		for _, d := range w.Decisions {
			if d.Decision == DecisionApproved {
				approvals++
			}
		}
		if verdict == DecisionRejected || approvals >= max(w.Approvals, 1) {
			w.Status, w.Decision, w.Values = WaitpointDecided, verdict, values
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		var ae *AlreadyDecided
		if errors.As(err, &ae) {
			return ae.Waitpoint, err
		}
		var e *Error
		if errors.As(err, &e) {
			return Waitpoint{}, err
		}
		return Waitpoint{}, wrap("decide approval", err)
	}
	if w.Decided() {
		s.wakeWaiting(ctx, w)
	}
	return w, nil
}

// mayDecide reports whether an API or dashboard answer a may decide w:
// without approvers, any role that may operate; with them, an admin, a
// role of approvers.roles, or a person of approvers.emails.
func mayDecide(w Waitpoint, a ApprovalAnswer) bool {
	if len(w.Roles) == 0 && len(w.Emails) == 0 || a.Role == RoleAdmin {
		return true
	}
	return slices.Contains(w.Roles, string(a.Role)) ||
		a.Email != "" && slices.ContainsFunc(w.Emails, func(e string) bool { return strings.EqualFold(e, a.Email) })
}

// notApprover says who may decide w, to the one who may not.
func notApprover(w Waitpoint, a ApprovalAnswer) string {
	var who []string
	if len(w.Roles) > 0 {
		who = append(who, fmt.Sprintf("the roles %v", w.Roles))
	}
	if len(w.Emails) > 0 {
		who = append(who, fmt.Sprintf("%d named people", len(w.Emails)))
	}
	you := "your role is " + string(a.Role)
	if a.Email == "" {
		you += " (a project key, not a person)"
	}
	return "this approval may be decided by " + strings.Join(who, " or ") + "; " + you
}

// checkValues checks an answer's form values against the approval's form;
// a rejection may leave required fields out.
func checkValues(form json.RawMessage, values map[string]any, verdict string) (any, error) {
	if len(form) == 0 {
		if len(values) > 0 {
			return nil, Invalid("values: this approval has no form")
		}
		return nil, nil
	}
	fs, err := flowdef.ParseFormSchema(form)
	if err != nil {
		return nil, Invalid("the approval's form is not valid: %v", err)
	}
	if values == nil {
		values = map[string]any{}
	}
	if verdict == DecisionRejected && len(values) == 0 {
		return nil, nil
	}
	if err := fs.Validate(values); err != nil {
		var fe *flowdef.FieldError
		if errors.As(err, &fe) {
			return nil, &Error{Kind: ErrInvalid, Code: "VALIDATION_ERROR", Message: fmt.Sprintf("values.%s %s", fe.Field, fe.Message)}
		}
		return nil, Invalid("values: %v", err)
	}
	return values, nil
}

// CallbackByToken answers a WAIT for a callback: the first POST wins.
func (s *RunService) CallbackByToken(ctx context.Context, token string, cb Callback) (Waitpoint, error) {
	ws, err := s.waitpoints()
	if err != nil {
		return Waitpoint{}, err
	}
	gone := NotFound("callback", "")
	if !validTokenShape(token) {
		return Waitpoint{}, gone
	}
	hash := HashWaitpointToken(token)
	found, err := ws.WaitpointByToken(ctx, hash)
	if IsNotFound(err) || err == nil && found.Kind != WaitCallback {
		return Waitpoint{}, gone
	} else if err != nil {
		return Waitpoint{}, wrap("read callback", err)
	}
	now := s.clock()
	cb.ReceivedAt = now
	w, err := ws.UpdateWaitpoint(ctx, found.Project, found.RunID, found.Step, func(w *Waitpoint, ok bool) (bool, error) {
		switch {
		case !ok:
			return false, gone
		case w.Decided() && w.Callback != nil:
			return false, alreadyDecided(*w)
		case w.Decided(), w.TokenHash != hash, !now.Before(w.ExpiresAt):
			return false, gone
		}
		w.Status, w.Decision, w.Callback = WaitpointDecided, "called", &cb
		return true, nil
	})
	if err != nil {
		var ae *AlreadyDecided
		if errors.As(err, &ae) {
			return ae.Waitpoint, err
		}
		var e *Error
		if errors.As(err, &e) {
			return Waitpoint{}, err
		}
		return Waitpoint{}, wrap("answer callback", err)
	}
	s.wakeWaiting(ctx, w)
	return w, nil
}

// ListApprovals pages through a project's approvals, PENDING (the
// default) or DECIDED, newest first.
func (s *RunService) ListApprovals(ctx context.Context, p Project, pr PageRequest) (List[ApprovalItem], error) {
	ws, err := s.waitpoints()
	if err != nil {
		return List[ApprovalItem]{}, err
	}
	if pr.Status == "" {
		pr.Status = WaitpointPending
	}
	if pr.Status != WaitpointPending && pr.Status != WaitpointDecided {
		return List[ApprovalItem]{}, InvalidCode("INVALID_PARAMETER", "status must be PENDING or DECIDED, got %q", ClipID(pr.Status))
	}
	scope := p.ID + "/approvals"
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return List[ApprovalItem]{}, err
	}
	page, err := ws.ListWaitpoints(ctx, p.ID, q)
	if err != nil {
		return List[ApprovalItem]{}, wrap("list approvals", err)
	}
	return list(s, scope, q, page, Waitpoint.Item), nil
}

// wakeWaiting makes the run parked on w due now where the store's own
// write did not (Waker: SQS), and wakes idle workers (flowd). A failure
// is logged: the store's write made the run due, and the parked run's
// next early message finds it so (RunRuntime.DueReader: within SQS's
// 15-minute delay), or, without that reader, its waitpoint's expiry does.
func (s *RunService) wakeWaiting(ctx context.Context, w Waitpoint) {
	if s.rt == nil || s.rt.Waker == nil {
		return
	}
	if err := s.rt.Waker.WakeRun(ctx, w.Project, w.RunID); err != nil {
		s.log.ErrorContext(ctx, "wake run after a decision", "run", w.RunID, "step", w.Step, "err", err)
	}
}

// recheckWaitpoints is for an attempt that just parked its run on
// waitpoints: an answer that came while it ran (before the park) found the
// run held and could not resume it, so the attempt looks itself.
func (s *RunService) recheckWaitpoints(ctx context.Context, project, runID string, steps []string) bool {
	ws, err := s.waitpoints()
	if err != nil {
		return false
	}
	for _, st := range steps {
		w, err := s.readWaitpoint(ctx, ws, project, runID, st)
		if err == nil && w.Decided() {
			return true
		}
	}
	return false
}

var _ Waitpoints = (*RunService)(nil)

// String names a waitpoint in logs.
func (w Waitpoint) String() string { return fmt.Sprintf("%s %s/%s", w.Kind, w.RunID, w.Step) }
