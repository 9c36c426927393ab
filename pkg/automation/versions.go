package automation

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Definition is the versioned part of a flow: everything that changes what
// a run does. Name, description, status and the allowlist are metadata and
// are not versioned. DefinitionOf and Definition.ApplyTo are the one place
// that copies the definition's fields between a flow and a version, draft
// or run.
type Definition struct {
	Trigger     Trigger      `json:"trigger"`
	Steps       []Step       `json:"steps"`
	OnError     []Step       `json:"onError,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Throttle    *Throttle    `json:"throttle,omitempty"`
}

// DefinitionOf returns the definition of f. Its slices are f's: a caller
// that changes one clones it first.
func DefinitionOf(f Flow) Definition {
	return Definition{Trigger: f.Trigger, Steps: f.Steps, OnError: f.OnError, Concurrency: f.Concurrency, Throttle: f.Throttle}
}

// ApplyTo makes d the definition of f.
func (d Definition) ApplyTo(f *Flow) {
	f.Trigger, f.Steps, f.OnError = d.Trigger, d.Steps, d.OnError
	f.Concurrency, f.Throttle = d.Concurrency, d.Throttle
	f.TriggerType = d.Trigger.Type
	if f.Steps == nil {
		f.Steps = []Step{}
	}
}

// shown is d as answers show it: steps always a list.
func (d Definition) shown() Definition {
	if d.Steps == nil {
		d.Steps = []Step{}
	}
	return d
}

// HasDefinition reports whether in carries a definition field: an update
// with one publishes a new version, one without changes only metadata.
func (in FlowInput) HasDefinition() bool {
	return in.Trigger != nil || in.Steps != nil || in.OnError != nil || in.Concurrency.Set || in.Throttle.Set
}

// Draft is the definition fields of in, as a draft takes them.
func (in FlowInput) Draft() DraftInput {
	return DraftInput{Trigger: in.Trigger, Steps: in.Steps, OnError: in.OnError, Concurrency: in.Concurrency, Throttle: in.Throttle}
}

// flowInput is in as the definition fields of a flow update.
func (in DraftInput) flowInput() FlowInput {
	return FlowInput{Trigger: in.Trigger, Steps: in.Steps, OnError: in.OnError, Concurrency: in.Concurrency, Throttle: in.Throttle}
}

// FlowVersion is one published, immutable version of a flow's definition.
// List items leave out Definition.
type FlowVersion struct {
	FlowID  string    `json:"-"`
	Project string    `json:"-"`
	Version int64     `json:"version"`
	Created time.Time `json:"created"`
	Message string    `json:"message"`
	// CreatedBy is the ID of the API key that published the version, or
	// PublisherDashboard.
	CreatedBy  string      `json:"createdBy"`
	Definition *Definition `json:"definition,omitempty"`
}

// PublisherDashboard is FlowVersion.CreatedBy for what the dashboard
// publishes.
const PublisherDashboard = "dashboard"

// Draft is the one unpublished definition a flow may have: saved, read and
// discarded without changing what runs, then published as the next version.
type Draft struct {
	FlowID  string `json:"flowId"`
	Project string `json:"-"`
	// BasedOn is the flow's live version when the draft was started: a
	// publish after another version went live is DRAFT_OUTDATED.
	BasedOn int64     `json:"basedOn"`
	Updated time.Time `json:"updated"`
	Definition
}

// VersionWrites is what a flow write (FlowStore.CreateFlow, PutFlow)
// stores beside the flow in the same atomic write, so that a flow's live
// version and HasDraft never disagree with its versions and draft.
type VersionWrites struct {
	// Publish are new versions, in order; a version number the flow has
	// already fails the write with ErrConflict (FLOW_MODIFIED).
	Publish []FlowVersion
	// SaveDraft replaces the flow's draft; DropDraft removes it (none is
	// not an error).
	SaveDraft *Draft
	DropDraft bool
}

// Pruning versions. A write that publishes with FlowBounds.KeepVersions
// set removes, in the same atomic write, the flow's versions older than
// its newest KeepVersions (the new live one counted), except those a
// RUNNING run of the flow is pinned to (Run.FlowVersion): a run waiting in
// a WAIT step, for a CALL_FLOW child or for a slot is RUNNING, and must
// find its definition when it resumes. A version kept for a run is pruned
// by a later publish once no RUNNING run is pinned to it. A store may
// prune at most MaxPrunedPerWrite versions in one write, leaving the rest
// to the next publishes (a plan lowered from 1000 to 20 sheds its versions
// over a few publishes). Pruned versions are gone from FlowVersion,
// FlowVersions and UsageStore.StoredBytes. A run started concurrently
// with the write is pinned to the live version, or to the one before
// it, both always kept (minKeepVersions).
const MaxPrunedPerWrite = 50

// VersionStore reads the versions and drafts that flow writes store
// (VersionWrites). FlowStore.DeleteFlow removes them with the flow.
type VersionStore interface {
	// FlowVersion returns version n of the project's flow, definition
	// included; ErrNotFound (VERSION_NOT_FOUND) when there is none.
	FlowVersion(ctx context.Context, project, flowID string, n int64) (FlowVersion, error)
	// FlowVersions pages through the flow's versions that are kept
	// (pruned ones are left out, see VersionWrites), newest first,
	// without their definitions; a flow with none (or another project's)
	// is an empty page.
	FlowVersions(ctx context.Context, project, flowID string, q ListQuery) (Page[FlowVersion], error)
	// Draft returns the flow's draft; ErrNotFound (DRAFT_NOT_FOUND) when it
	// has none.
	Draft(ctx context.Context, project, flowID string) (Draft, error)
}

// live is f's live version number: a flow stored before versions existed
// has none recorded and runs its one definition, version 1.
func (f Flow) live() int64 { return max(f.LiveVersion, 1) }

type publisherKey struct{}

// WithPublisher returns a context whose publishes record by as their
// CreatedBy (PublisherDashboard for the dashboard); without it, the API
// key of the request's audit entry publishes.
func WithPublisher(ctx context.Context, by string) context.Context {
	return context.WithValue(ctx, publisherKey{}, by)
}

// publisher is who publishes in ctx (WithPublisher, else the request's key).
func publisher(ctx context.Context) string {
	if by, ok := ctx.Value(publisherKey{}).(string); ok {
		return by
	}
	if slot, ok := ctx.Value(auditKey{}).(*auditSlot); ok {
		return slot.e.Actor.KeyID
	}
	return ""
}

// publish makes the definition f now holds (validated, its secrets
// masked) the flow's next version, written with f. old is the flow as
// stored: one from before versions gets its definition recorded as
// version 1 first, so that no run pinned to it loses its steps.
func (s *FlowService) publish(ctx context.Context, old Flow, f *Flow, message string) {
	if old.LiveVersion == 0 {
		def := DefinitionOf(old)
		f.Publish = append(f.Publish, FlowVersion{
			FlowID: f.ID, Project: f.Project, Version: 1, Created: old.Updated, Definition: &def,
		})
	}
	def := DefinitionOf(*f)
	f.LiveVersion = old.live() + 1
	f.Publish = append(f.Publish, FlowVersion{
		FlowID: f.ID, Project: f.Project, Version: f.LiveVersion, Created: s.clock(),
		Message: message, CreatedBy: publisher(ctx), Definition: &def,
	})
}

// firstVersion records f's definition as its version 1, written with the
// new flow.
func (s *FlowService) firstVersion(ctx context.Context, f *Flow) {
	def := DefinitionOf(*f)
	f.LiveVersion = 1
	f.Publish = []FlowVersion{{
		FlowID: f.ID, Project: f.Project, Version: 1, Created: f.Created,
		CreatedBy: publisher(ctx), Definition: &def,
	}}
}

// keepOldSecrets adds to secrets the values of old that no field of the
// new definition names: versions share the flow's secrets by path, and a
// run pinned to an earlier version (or a restore of one) still finds the
// values its definition names. They go with the flow.
func keepOldSecrets(secrets, old map[string]string) {
	for path, v := range old {
		if _, ok := secrets[path]; !ok {
			secrets[path] = v
		}
	}
}

// storedFlowSecrets reads every secret value stored for f, also when its
// live definition names none: an earlier version may (keepOldSecrets).
func (s *FlowService) storedFlowSecrets(ctx context.Context, f Flow) (map[string]string, error) {
	raw, err := s.secrets.Secret(ctx, f.Project, FlowSecretName(f.ID))
	if errors.Is(err, ErrNotFound) {
		return map[string]string{}, nil
	} else if err != nil {
		return nil, wrap("read flow secrets", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, wrap("read flow secrets", err)
	}
	return m, nil
}
