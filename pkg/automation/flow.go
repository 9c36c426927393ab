package automation

import (
	"math"
	"time"
)

// FlowStatus says whether a flow's trigger fires.
type FlowStatus string

// Flow states. A new flow is INACTIVE.
const (
	FlowActive   FlowStatus = "ACTIVE"
	FlowInactive FlowStatus = "INACTIVE"
)

// Flow is a trigger and the steps it runs. Secret fields inside Trigger and
// Steps hold SecretMask (or nothing) once stored: the values themselves live
// in the Secrets store under FlowSecretName(ID).
type Flow struct {
	ID          string      `json:"id"`
	Project     string      `json:"-"`
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Status      FlowStatus  `json:"status"`
	Engine      Engine      `json:"engine"`
	TriggerType TriggerType `json:"triggerType"`
	RunCount    int64       `json:"runCount"`
	SuccessRate float64     `json:"successRate"`
	LastRun     *time.Time  `json:"lastRun"`
	Created     time.Time   `json:"created"`
	Updated     time.Time   `json:"updated"`
	Trigger     Trigger     `json:"trigger"`
	Steps       []Step      `json:"steps"`
	// OnError runs once when a run ends FAILED or TIMEOUT (after its
	// retries), with `error` in scope; it does not change the run's status.
	OnError []Step `json:"onError,omitempty"`
	// ManagedBy is ManagedByApply when `flowctl apply` created or last
	// updated the flow: a later apply with --prune may delete it.
	ManagedBy string `json:"managedBy,omitempty"`
	// Concurrency and Throttle bound how many runs execute at once and
	// start per period (flowlimits.go); nil: no bound but the project's.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Throttle    *Throttle    `json:"throttle,omitempty"`

	// AllowedIPs restricts the webhook receivers to these addresses and
	// CIDR ranges (canonical form); empty means no restriction.
	AllowedIPs []string `json:"-"`
	// Stats are the run counters behind RunCount, SuccessRate and LastRun.
	Stats FlowStats `json:"-"`
	// Version increases by one on every write; stores use it for optimistic
	// concurrency.
	Version int64 `json:"-"`

	// LiveVersion is the number of the published version the flow runs
	// (versions.go); HasDraft says whether a draft is saved beside it.
	LiveVersion int64 `json:"version"`
	HasDraft    bool  `json:"hasDraft"`
	// VersionWrites is what CreateFlow and PutFlow write beside the flow,
	// in the same atomic write (versions.go); never read back.
	VersionWrites `json:"-"`
	// FlowBounds are the quotas the write keeps in its own atomic write
	// (quota.go); never read back.
	FlowBounds `json:"-"`
	// StoppedAt is when the flow was last disabled: its runs created until
	// then stop at their next step (flowstop.go).
	StoppedAt *time.Time `json:"-"`
	// Poll is a POLL flow's polling (poll.go), read beside the flow when it
	// is shown; never stored with it.
	Poll *PollStatus `json:"poll,omitempty"`
}

// FlowStats are a flow's run counters, updated atomically when a run finishes.
type FlowStats struct {
	Finished  int64      // runs that reached a final state
	Succeeded int64      // of those, SUCCEEDED
	LastRun   *time.Time // start of the latest run
}

// WithStats fills the derived fields RunCount, SuccessRate and LastRun,
// and the live version of a flow stored before versions (1).
func (f Flow) WithStats() Flow {
	f.LiveVersion = f.live()
	f.VersionWrites = VersionWrites{} // written with the flow, not part of what it shows
	f.FlowBounds = FlowBounds{}
	f.RunCount = f.Stats.Finished
	f.SuccessRate = SuccessRate(f.Stats.Succeeded, f.Stats.Finished)
	f.LastRun = f.Stats.LastRun
	return f
}

// SuccessRate is the percentage of finished runs that succeeded, to one
// decimal, and 0 before the first finished run.
func SuccessRate(succeeded, finished int64) float64 {
	if finished == 0 {
		return 0
	}
	return math.Round(float64(succeeded)*1000/float64(finished)) / 10
}

// FlowSummary is the list item form of a flow: every field but description
// and the definition.
type FlowSummary struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Status      FlowStatus  `json:"status"`
	Engine      Engine      `json:"engine"`
	TriggerType TriggerType `json:"triggerType"`
	RunCount    int64       `json:"runCount"`
	SuccessRate float64     `json:"successRate"`
	LastRun     *time.Time  `json:"lastRun"`
	Created     time.Time   `json:"created"`
	Updated     time.Time   `json:"updated"`
	// Version and HasDraft are the flow's live version number and whether
	// a draft is saved beside it, as on the flow object.
	Version  int64 `json:"version"`
	HasDraft bool  `json:"hasDraft"`
	// ManagedBy is as on the flow object: in the list, so that apply
	// --prune needs no request per flow to find the flows it may delete.
	ManagedBy string `json:"managedBy,omitempty"`
}

// Summary returns the list item form of f.
func (f Flow) Summary() FlowSummary {
	f = f.WithStats()
	return FlowSummary{
		ID: f.ID, Name: f.Name, Status: f.Status, Engine: f.Engine, TriggerType: f.TriggerType,
		RunCount: f.RunCount, SuccessRate: f.SuccessRate, LastRun: f.LastRun,
		Created: f.Created, Updated: f.Updated, Version: f.LiveVersion, HasDraft: f.HasDraft,
		ManagedBy: f.ManagedBy,
	}
}

// IdempotencyKeyFor is the Idempotency-Key an HTTP step sends: the run it
// belongs to (originRunID: the run a retry resumed, if any, so that a
// resumed run keeps the keys of its origin) and the step's name, stable
// across every retry and resume.
func IdempotencyKeyFor(originRunID, stepName string) string { return originRunID + "." + stepName }

// WebhookDescriptor is the answer of the webhook lookup.
type WebhookDescriptor struct {
	FlowID     string `json:"flowId"`
	WebhookURL string `json:"webhookUrl"`
	Method     string `json:"method"`
	Enabled    bool   `json:"enabled"`
}

// WebhookSecurity is a flow's IP allowlist.
type WebhookSecurity struct {
	FlowID     string   `json:"flowId"`
	AllowedIPs []string `json:"allowedIPs"`
}
