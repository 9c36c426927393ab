package automation

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"
)

// DraftInput is the body of PUT …/draft: definition fields, validated as a
// create's. An absent field keeps the draft's value, or the live flow's
// when there is no draft yet. Its fields are Definition's (versions.go
// converts between it and FlowInput).
type DraftInput struct {
	Trigger *Trigger `json:"trigger"`
	Steps   *[]Step  `json:"steps"`
	OnError *[]Step  `json:"onError"`
	// Concurrency and Throttle: null removes them.
	Concurrency Nullable[Concurrency] `json:"concurrency"`
	Throttle    Nullable[Throttle]    `json:"throttle"`
}

// PublishRequest is the optional body of POST …/publish.
type PublishRequest struct {
	Message string `json:"message"`
	// Force publishes a draft started on an older live version
	// (DRAFT_OUTDATED otherwise), replacing what was published since.
	Force bool `json:"force"`
}

// MaxVersionMessage bounds a publish message, in characters.
const MaxVersionMessage = 500

// draftSecretPrefix marks, in the flow's stored secrets, the values a
// draft's fields hold until it is published or discarded: the live
// definition keeps reading its own at the bare path.
const draftSecretPrefix = "draft:"

// Draft returns the flow's draft.
func (s *FlowService) Draft(ctx context.Context, p Project, id string) (Draft, error) {
	if _, err := s.store.Flow(ctx, p.ID, id); err != nil {
		return Draft{}, wrap("get draft", err)
	}
	d, err := s.store.Draft(ctx, p.ID, id)
	d.Definition = d.Definition.shown()
	return d, wrap("get draft", err)
}

// SaveDraft validates a definition and saves it as the flow's one draft,
// leaving what runs unchanged. Secret values it sets are kept apart from
// the live ones until it is published.
func (s *FlowService) SaveDraft(ctx context.Context, p Project, id string, in DraftInput) (Draft, error) {
	var saved Draft
	_, err := s.modifyFlow(ctx, p, id, func(f *Flow) error {
		base, basedOn := DefinitionOf(*f), f.live()
		if f.HasDraft {
			d, err := s.store.Draft(ctx, p.ID, id)
			if err != nil && !IsNotFound(err) {
				return err
			} else if err == nil {
				base, basedOn = d.Definition, d.BasedOn
			}
		}
		cand := *f
		base.ApplyTo(&cand)
		in.flowInput().applyTo(&cand)
		if err := s.validateFlow(ctx, &cand); err != nil {
			return err
		}
		stored, err := s.storedFlowSecrets(ctx, *f)
		if err != nil {
			return err
		}
		// A mask keeps the draft's own value, else the live one.
		known := maps.Clone(stored)
		for path, v := range stored {
			if rest, ok := strings.CutPrefix(path, draftSecretPrefix); ok {
				known[rest] = v
			}
		}
		values, err := extractSecrets(&cand, known)
		if err != nil {
			return err
		}
		next := withoutDraftSecrets(stored)
		for path, v := range values {
			if stored[path] != v {
				next[draftSecretPrefix+path] = v
			}
		}
		if !maps.Equal(next, stored) {
			if err := s.putFlowSecrets(ctx, *f, next); err != nil {
				return err
			}
		}
		saved = Draft{FlowID: f.ID, Project: p.ID, BasedOn: basedOn, Updated: s.clock(), Definition: DefinitionOf(cand)}
		f.HasDraft, f.SaveDraft = true, &saved
		return nil
	})
	if err != nil {
		return Draft{}, err
	}
	return saved, nil
}

// DiscardDraft removes the flow's draft; none is DRAFT_NOT_FOUND.
func (s *FlowService) DiscardDraft(ctx context.Context, p Project, id string) error {
	_, err := s.modifyFlow(ctx, p, id, func(f *Flow) error {
		if !f.HasDraft {
			return NotFound("draft", id)
		}
		stored, err := s.storedFlowSecrets(ctx, *f)
		if err != nil {
			return err
		}
		if next := withoutDraftSecrets(stored); len(next) != len(stored) {
			if err := s.putFlowSecrets(ctx, *f, next); err != nil {
				return err
			}
		}
		f.HasDraft, f.DropDraft = false, true
		return nil
	})
	return err
}

// Publish makes the flow's draft its next version, live at once, and
// answers the flow.
func (s *FlowService) Publish(ctx context.Context, p Project, id string, req PublishRequest) (Flow, error) {
	if n := utf8.RuneCountInString(req.Message); n > MaxVersionMessage {
		return Flow{}, Invalid("message is %d characters long; at most %d are allowed", n, MaxVersionMessage)
	}
	return s.modifyFlow(ctx, p, id, func(f *Flow) error {
		noDraft := Conflict("DRAFT_NOT_FOUND", "flow %q has no draft to publish: save one with PUT /api/v1/flows/%s/draft", id, id)
		if !f.HasDraft {
			return noDraft
		}
		d, err := s.store.Draft(ctx, p.ID, id)
		if IsNotFound(err) {
			return noDraft
		} else if err != nil {
			return err
		}
		if d.BasedOn != f.live() && !req.Force {
			return Conflict("DRAFT_OUTDATED",
				"the draft was started on version %d, but version %d has been published since: publish with {\"force\": true} to replace it, or discard the draft", d.BasedOn, f.live())
		}
		old := *f
		d.Definition.ApplyTo(f)
		f.HasDraft, f.DropDraft = false, true
		return s.publishDefinition(ctx, old, f, req.Message)
	})
}

// RestoreVersion publishes a copy of version n as the flow's next version.
func (s *FlowService) RestoreVersion(ctx context.Context, p Project, id string, n int64) (Flow, error) {
	v, err := s.FlowVersion(ctx, p, id, n)
	if err != nil {
		return Flow{}, err
	}
	return s.modifyFlow(ctx, p, id, func(f *Flow) error {
		old := *f
		def := *v.Definition
		def.Steps, def.OnError = CloneSteps(def.Steps), CloneSteps(def.OnError)
		def.Trigger = cloneTrigger(def.Trigger)
		def.ApplyTo(f)
		return s.publishDefinition(ctx, old, f, fmt.Sprintf("restored from version %d", n))
	})
}

// FlowVersion returns version n of a flow with its definition.
func (s *FlowService) FlowVersion(ctx context.Context, p Project, id string, n int64) (FlowVersion, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return FlowVersion{}, wrap("get version", err)
	}
	v, err := s.store.FlowVersion(ctx, p.ID, id, n)
	if IsNotFound(err) && n == 1 && f.LiveVersion == 0 {
		return legacyVersion(f), nil
	} else if err != nil {
		return FlowVersion{}, wrap("get version", err)
	}
	if v.Definition != nil {
		def := v.Definition.shown()
		v.Definition = &def
	}
	return v, nil
}

// ListFlowVersions returns one page of a flow's versions, newest first.
func (s *FlowService) ListFlowVersions(ctx context.Context, p Project, id string, pr PageRequest) (List[FlowVersion], error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return List[FlowVersion]{}, wrap("list versions", err)
	}
	scope := p.ID + "/flows/" + id + "/versions"
	q, err := s.listQuery(scope, PageRequest{Limit: pr.Limit, Cursor: pr.Cursor})
	if err != nil {
		return List[FlowVersion]{}, err
	}
	page, err := s.store.FlowVersions(ctx, p.ID, id, q)
	if err != nil {
		return List[FlowVersion]{}, wrap("list versions", err)
	}
	if len(page.Items) == 0 && f.LiveVersion == 0 && q.After == "" {
		v := legacyVersion(f)
		v.Definition = nil
		page.Items = []FlowVersion{v}
	}
	return list(s, scope, q, page, func(v FlowVersion) FlowVersion { return v }), nil
}

// legacyVersion is version 1 of a flow stored before versions existed (and
// not published since): its one definition.
func legacyVersion(f Flow) FlowVersion {
	def := DefinitionOf(f)
	return FlowVersion{FlowID: f.ID, Project: f.Project, Version: 1, Created: f.Created, Definition: &def}
}

// withoutDraftSecrets is a copy of stored without the draft's values.
func withoutDraftSecrets(stored map[string]string) map[string]string {
	out := make(map[string]string, len(stored))
	for path, v := range stored {
		if !strings.HasPrefix(path, draftSecretPrefix) {
			out[path] = v
		}
	}
	return out
}

// promoteDraftSecrets is a copy of stored with the draft's values in
// place of the live ones at the same paths.
func promoteDraftSecrets(stored map[string]string) map[string]string {
	out := maps.Clone(stored)
	for path, v := range stored {
		if rest, ok := strings.CutPrefix(path, draftSecretPrefix); ok {
			out[rest] = v
		}
	}
	return out
}
