package automation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// PrefixAudit starts audit entry IDs.
const PrefixAudit = "aud_"

// AuditRetention is how long the audit log keeps an entry.
const AuditRetention = 90 * 24 * time.Hour

// AuditEntry records one management write or sign-in: who (the key and its
// role), what (the action and the resource it touched), and from where. An
// entry is written in the same commit as the change it records (see
// WithAudit), so the log never misses a change nor records one that did not
// happen.
type AuditEntry struct {
	ID        string        `json:"id"`
	Project   string        `json:"-"`
	Time      time.Time     `json:"time"`
	Actor     AuditActor    `json:"actor"`
	Action    string        `json:"action"` // "flow.create", "session.signin", …
	Resource  AuditResource `json:"resource"`
	RequestID string        `json:"requestId"`
	SourceIP  string        `json:"sourceIp"`
}

// AuditActor is who acted: a person ({"userId", "email", "role"}) or an
// API key ({"keyId", "role"}). A failed sign-in with a key that matches
// nothing has no key (""); one with an unknown email names the email.
type AuditActor struct {
	KeyID  string
	UserID string
	Email  string
	Role   Role
}

// MarshalJSON writes a person's shape when the actor is a person (a user ID
// or, for a failed sign-in, an email) and the key's shape otherwise, which
// is the shape every entry had before people existed.
func (a AuditActor) MarshalJSON() ([]byte, error) {
	if a.UserID != "" || a.Email != "" {
		return json.Marshal(struct {
			UserID string `json:"userId"`
			Email  string `json:"email"`
			Role   Role   `json:"role"`
		}{a.UserID, a.Email, a.Role})
	}
	return json.Marshal(struct {
		KeyID string `json:"keyId"`
		Role  Role   `json:"role"`
	}{a.KeyID, a.Role})
}

// UnmarshalJSON reads either shape, so stored entries of keys (written
// before people existed) read as they did.
func (a *AuditActor) UnmarshalJSON(b []byte) error {
	var v struct {
		KeyID  string `json:"keyId"`
		UserID string `json:"userId"`
		Email  string `json:"email"`
		Role   Role   `json:"role"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = AuditActor{KeyID: v.KeyID, UserID: v.UserID, Email: v.Email, Role: v.Role}
	return nil
}

// AuditResource is what an action touched.
type AuditResource struct {
	Type string `json:"type"` // "flow", "connection", "run", "project", "session"
	ID   string `json:"id"`
	// FlowID is the flow of a run, so that a reader of the log can open
	// the run (runs are addressed within their flow).
	FlowID string `json:"flowId,omitempty"`
}

// MarshalJSON writes the time in TimeFormat, as every timestamp.
func (e AuditEntry) MarshalJSON() ([]byte, error) {
	type plain AuditEntry
	return json.Marshal(struct {
		plain
		Time stamp `json:"time"`
	}{plain(e), stamp(e.Time)})
}

// AuditQuery asks for one page of a project's audit log, newest first.
type AuditQuery struct {
	Limit        int
	After        string    // a store position from an earlier Page.Next
	Since, Until time.Time // time in [Since, Until); zero: unbounded
}

// AuditStore keeps the audit log. Entries of a change are written by the
// store method making the change, in the same transaction, when its context
// carries one (AuditFrom); AppendAudit is for events that change nothing
// else (sign-ins). Entries older than AuditRetention may be dropped.
type AuditStore interface {
	// AppendAudit writes one entry on its own.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// AuditLog pages through a project's entries, newest first (by Time,
	// then ID).
	AuditLog(ctx context.Context, project string, q AuditQuery) (Page[AuditEntry], error)
}

type auditKey struct{}

// auditSlot holds a request's entry; the Service fills in the ID of what a
// create makes once it has made the ID (auditCreated).
type auditSlot struct {
	e     AuditEntry
	taken atomic.Bool // an audited store write has taken the entry
}

// WithAudit returns a context whose audited store writes record e in their
// own transaction. One request makes one entry: a store writes it with
// every audited write the request makes, keeping it once (entries are keyed
// by ID), so that it lands with the first change that commits.
func WithAudit(ctx context.Context, e AuditEntry) context.Context {
	return context.WithValue(ctx, auditKey{}, &auditSlot{e: e})
}

// AuditFrom returns the entry an audited store write must record, if any.
func AuditFrom(ctx context.Context) (AuditEntry, bool) {
	slot, ok := ctx.Value(auditKey{}).(*auditSlot)
	if !ok {
		return AuditEntry{}, false
	}
	slot.taken.Store(true)
	return slot.e, true
}

// AuditUntaken returns the request's entry when no audited store write
// took it: a request that succeeded through a store method that does not
// record entries yet. The caller writes it on its own (RecordAudit), so
// the change is still in the log, if not in its commit.
func AuditUntaken(ctx context.Context) (AuditEntry, bool) {
	slot, ok := ctx.Value(auditKey{}).(*auditSlot)
	if !ok || slot.taken.Load() {
		return AuditEntry{}, false
	}
	return slot.e, true
}

// auditCreated names the resource a create makes, for a request whose
// entry does not know it yet (the ID is made here, after the request
// arrived).
func auditCreated(ctx context.Context, id string) {
	if slot, ok := ctx.Value(auditKey{}).(*auditSlot); ok && slot.e.Resource.ID == "" {
		slot.e.Resource.ID = id
	}
}

// NewAuditEntry starts an entry for a request of pr, with a fresh ID and
// the Service's clock.
func (s *ProjectService) NewAuditEntry(pr Principal, action string, res AuditResource, requestID, sourceIP string) AuditEntry {
	return s.newAuditEntry(pr, action, res, requestID, sourceIP)
}

// newAuditEntry names the person when pr is one, else the key.
func (b *base) newAuditEntry(pr Principal, action string, res AuditResource, requestID, sourceIP string) AuditEntry {
	actor := AuditActor{KeyID: pr.KeyID, Role: pr.Role}
	if pr.UserID != "" || pr.Email != "" {
		actor = AuditActor{UserID: pr.UserID, Email: pr.Email, Role: pr.Role}
	}
	return AuditEntry{
		ID: b.newID(PrefixAudit), Project: pr.Project.ID, Time: b.clock(),
		Actor: actor, Action: action, Resource: res,
		RequestID: requestID, SourceIP: sourceIP,
	}
}

// RecordAudit writes an entry that goes with no other change, such as a
// dashboard sign-in.
func (s *ProjectService) RecordAudit(ctx context.Context, e AuditEntry) error {
	return wrap("record audit entry", s.store.AppendAudit(ctx, e))
}

// AuditSearch is a client's audit log request, unparsed.
type AuditSearch struct {
	PageRequest
	Since, Until string // RFC 3339, optional
	// Action keeps the entries whose action is Action, or starts with it
	// followed by a dot ("flow" keeps flow.create and flow.draft.save);
	// Actor keeps those of one key ID. Both optional.
	Action, Actor string
}

// MaxAuditScan bounds the entries one filtered page of the audit log reads
// (by action or actor, which stores do not index): a page stops there with
// a cursor to go on from, even when it found fewer entries than its limit.
const MaxAuditScan = 1000

// maxAuditScan is MaxAuditScan, lowered by tests.
var maxAuditScan = MaxAuditScan

// matches reports whether e passes the search's action and actor filters.
func (in AuditSearch) matches(e AuditEntry) bool {
	if in.Actor != "" && e.Actor.KeyID != in.Actor {
		return false
	}
	if in.Action != "" && e.Action != in.Action && !strings.HasPrefix(e.Action, in.Action+".") {
		return false
	}
	return true
}

// AuditLog lists the project's audit entries, newest first.
func (s *ProjectService) AuditLog(ctx context.Context, p Project, in AuditSearch) (List[AuditEntry], error) {
	if in.Status != "" {
		return List[AuditEntry]{}, InvalidCode("INVALID_PARAMETER", "the audit log takes no status filter")
	}
	var q AuditQuery
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", in.Since, &q.Since}, {"until", in.Until, &q.Until}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			return List[AuditEntry]{}, InvalidCode("INVALID_PARAMETER", "%s must be an RFC 3339 time such as 2026-05-01T00:00:00Z, got %q", t.name, ClipID(t.v))
		}
		*t.dst = v.UTC()
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return List[AuditEntry]{}, InvalidCode("INVALID_PARAMETER", "since must be before until")
	}
	for _, f := range []struct{ name, v string }{{"action", in.Action}, {"actor", in.Actor}} {
		if len(f.v) > 100 {
			return List[AuditEntry]{}, InvalidCode("INVALID_PARAMETER", "%s is at most 100 characters", f.name)
		}
	}
	scope := p.ID + "/audit?" + in.Since + "\x00" + in.Until + "\x00" + in.Action + "\x00" + in.Actor
	lq, err := s.listQuery(scope, in.PageRequest)
	if err != nil {
		return List[AuditEntry]{}, err
	}
	q.Limit, q.After = lq.Limit, lq.After
	if in.Action == "" && in.Actor == "" {
		page, err := s.store.AuditLog(ctx, p.ID, q)
		if err != nil {
			return List[AuditEntry]{}, wrap("read audit log", err)
		}
		return list(s, scope, lq, page, func(e AuditEntry) AuditEntry { return e }), nil
	}
	// Filtered: read store pages, keep what matches, and stop at the
	// limit or after MaxAuditScan entries. A position is an entry's
	// AuditSortKey, so the page may end at any entry read.
	var out Page[AuditEntry]
	for scanned := 0; ; {
		q.Limit = min(MaxPageSize, maxAuditScan-scanned)
		page, err := s.store.AuditLog(ctx, p.ID, q)
		if err != nil {
			return List[AuditEntry]{}, wrap("read audit log", err)
		}
		for i, e := range page.Items {
			if !in.matches(e) {
				continue
			}
			out.Items = append(out.Items, e)
			if len(out.Items) == lq.Limit {
				if i < len(page.Items)-1 || page.Next != "" {
					out.Next = AuditSortKey(e)
				}
				return list(s, scope, lq, out, func(e AuditEntry) AuditEntry { return e }), nil
			}
		}
		scanned += len(page.Items)
		if page.Next == "" {
			break
		}
		q.After = page.Next
		if scanned >= maxAuditScan {
			out.Next = page.Next
			break
		}
	}
	return list(s, scope, lq, out, func(e AuditEntry) AuditEntry { return e }), nil
}

// AuditSortKey orders entries in a store: the time in fixed-width
// milliseconds, then the ID, so that a string comparison is the log's
// order and a page position is one string.
func AuditSortKey(e AuditEntry) string {
	return fmt.Sprintf("%015d#%s", e.Time.UnixMilli(), e.ID)
}

// SignIn checks a key for a dashboard sign-in and records the attempt in
// the audit log: session.signin by the key, or session.signin_failed. A
// failure with a key that exists (revoked) is logged in its project with
// the key's ID; one with no such key is logged with no project (no project
// has it to see), for the operator.
func (s *ProjectService) SignIn(ctx context.Context, key, requestID, sourceIP string) (Principal, error) {
	pr, err := s.AuthenticatePrincipal(ctx, key)
	if err == nil {
		e := s.NewAuditEntry(pr, "session.signin", AuditResource{Type: "session", ID: pr.KeyID}, requestID, sourceIP)
		if aerr := s.RecordAudit(ctx, e); aerr != nil {
			return Principal{}, aerr
		}
		return pr, nil
	}
	if !errors.Is(err, ErrUnauthorized) {
		return Principal{}, err
	}
	var who Principal
	if validKeyShape(key) {
		if k, kerr := s.store.KeyByHash(ctx, HashAPIKey(key)); kerr == nil {
			who = Principal{Project: Project{ID: k.Project}, KeyID: k.ID, Role: k.Role}
		}
	}
	e := s.NewAuditEntry(who, "session.signin_failed", AuditResource{Type: "session", ID: who.KeyID}, requestID, sourceIP)
	if aerr := s.RecordAudit(ctx, e); aerr != nil {
		return Principal{}, aerr
	}
	return Principal{}, err
}
