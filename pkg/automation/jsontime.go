package automation

import (
	"encoding/json"
	"time"
)

// TimeFormat is how every timestamp leaves the service: RFC 3339 in UTC
// with exactly three fraction digits ("2026-01-02T15:04:05.000Z"), so that
// clients and scripts can compare them as text. time.Time's own encoding
// drops trailing zeros (".49Z"), hence the MarshalJSON methods below; they
// shadow the time fields of each type and leave every other field as
// declared, so a field added to a type is encoded without touching them.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// stamp is a time encoded in TimeFormat. It is a TextMarshaler, not a
// json.Marshaler: encoding/json quotes a text as it is, while it parses
// and compacts again whatever a MarshalJSON returns, at every level of
// nesting, which was a measurable share of encoding a page of runs.
type stamp time.Time

func (t stamp) MarshalText() ([]byte, error) {
	return time.Time(t).UTC().AppendFormat(make([]byte, 0, len(TimeFormat)), TimeFormat), nil
}

func stampOf(t *time.Time) *stamp {
	if t == nil {
		return nil
	}
	s := stamp(*t)
	return &s
}

// rate is successRate as clients see it: null before the first finished run
// (runCount counts finished runs), so that "never ran" is not read as 0 %.
func rate(runCount int64, r float64) *float64 {
	if runCount == 0 {
		return nil
	}
	return &r
}

// MarshalJSON writes timestamps in TimeFormat and successRate as null
// before the first finished run.
func (f Flow) MarshalJSON() ([]byte, error) {
	type plain Flow
	return json.Marshal(struct {
		plain
		SuccessRate *float64 `json:"successRate"`
		LastRun     *stamp   `json:"lastRun"`
		Created     stamp    `json:"created"`
		Updated     stamp    `json:"updated"`
	}{plain(f), rate(f.RunCount, f.SuccessRate), stampOf(f.LastRun), stamp(f.Created), stamp(f.Updated)})
}

// MarshalJSON writes timestamps in TimeFormat and successRate as null
// before the first finished run.
func (f FlowSummary) MarshalJSON() ([]byte, error) {
	type plain FlowSummary
	return json.Marshal(struct {
		plain
		SuccessRate *float64 `json:"successRate"`
		LastRun     *stamp   `json:"lastRun"`
		Created     stamp    `json:"created"`
		Updated     stamp    `json:"updated"`
	}{plain(f), rate(f.RunCount, f.SuccessRate), stampOf(f.LastRun), stamp(f.Created), stamp(f.Updated)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run
	return json.Marshal(struct {
		plain
		Created       stamp  `json:"created"`
		Started       *stamp `json:"started"`
		Finished      *stamp `json:"finished"`
		NextAttemptAt *stamp `json:"nextAttemptAt"`
	}{plain(r), stamp(r.Created), stampOf(r.Started), stampOf(r.Finished), stampOf(r.NextAttemptAt)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (s StepResult) MarshalJSON() ([]byte, error) {
	type plain StepResult
	return json.Marshal(struct {
		plain
		StartedAt  *stamp `json:"startedAt,omitempty"`
		FinishedAt *stamp `json:"finishedAt,omitempty"`
	}{plain(s), stampOf(s.StartedAt), stampOf(s.FinishedAt)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (c Connection) MarshalJSON() ([]byte, error) {
	type plain Connection
	return json.Marshal(struct {
		plain
		Created stamp `json:"created"`
		Updated stamp `json:"updated"`
	}{plain(c), stamp(c.Created), stamp(c.Updated)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (p Project) MarshalJSON() ([]byte, error) {
	type plain Project
	return json.Marshal(struct {
		plain
		Created stamp `json:"created"`
	}{plain(p), stamp(p.Created)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (k APIKey) MarshalJSON() ([]byte, error) {
	type plain APIKey
	return json.Marshal(struct {
		plain
		Created stamp  `json:"created"`
		Revoked *stamp `json:"revoked,omitempty"`
	}{plain(k), stamp(k.Created), stampOf(k.Revoked)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (s Sample) MarshalJSON() ([]byte, error) {
	type plain Sample
	return json.Marshal(struct {
		plain
		CapturedAt stamp `json:"capturedAt"`
	}{plain(s), stamp(s.CapturedAt)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (w WebhookTest) MarshalJSON() ([]byte, error) {
	type plain WebhookTest
	return json.Marshal(struct {
		plain
		ExpiresAt stamp `json:"expiresAt"`
	}{plain(w), stamp(w.ExpiresAt)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (w WebhookSample) MarshalJSON() ([]byte, error) {
	type plain WebhookSample
	return json.Marshal(struct {
		plain
		ExpiresAt  *stamp `json:"expiresAt,omitempty"`
		CapturedAt stamp  `json:"capturedAt"`
	}{plain(w), stampOf(w.ExpiresAt), stamp(w.CapturedAt)})
}

// MarshalJSON writes timestamps in TimeFormat.
func (a OAuthApp) MarshalJSON() ([]byte, error) {
	type plain OAuthApp
	return json.Marshal(struct {
		plain
		Created stamp `json:"created"`
	}{plain(a), stamp(a.Created)})
}
