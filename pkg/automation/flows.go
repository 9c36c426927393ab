package automation

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/netip"
	"slices"
)

// FlowInput is the body of a flow create or update. A nil field is absent:
// on create it takes its default, on update it keeps its value.
type FlowInput struct {
	Name        *string  `json:"name"`
	Engine      *Engine  `json:"engine"`
	Description *string  `json:"description"`
	Trigger     *Trigger `json:"trigger"`
	Steps       *[]Step  `json:"steps"`
	OnError     *[]Step  `json:"onError"`
	// ManagedBy marks (ManagedByApply) or unmarks ("") a flow as managed
	// by `flowctl apply`.
	ManagedBy *string `json:"managedBy"`
	// Concurrency and Throttle: null removes them.
	Concurrency Nullable[Concurrency] `json:"concurrency"`
	Throttle    Nullable[Throttle]    `json:"throttle"`
}

// applyTo sets the fields of f that in carries; the others keep their
// values (an update), or the new flow's defaults (a create). Engine is not
// among them: it is fixed when the flow is made.
func (in FlowInput) applyTo(f *Flow) {
	if in.Name != nil {
		f.Name = *in.Name
	}
	if in.Description != nil {
		f.Description = *in.Description
	}
	if in.Trigger != nil {
		f.Trigger = *in.Trigger
	}
	if in.Steps != nil {
		f.Steps = *in.Steps
	}
	if in.OnError != nil {
		f.OnError = *in.OnError
	}
	if in.Concurrency.Set {
		f.Concurrency = in.Concurrency.Value
	}
	if in.Throttle.Set {
		f.Throttle = in.Throttle.Value
	}
}

// updateAttempts bounds the read-modify-write retries of a flow update that
// races with another writer.
const updateAttempts = 3

// MaxAllowedIPs bounds a flow's allowlist.
const MaxAllowedIPs = 100

// ListFlows returns one page of the project's flows as list items.
func (s *FlowService) ListFlows(ctx context.Context, p Project, pr PageRequest) (List[FlowSummary], error) {
	if pr.Status != "" && pr.Status != string(FlowActive) && pr.Status != string(FlowInactive) {
		return List[FlowSummary]{}, InvalidCode("INVALID_PARAMETER", "status must be ACTIVE or INACTIVE, got %q", pr.Status)
	}
	scope := p.ID + "/flows" // a cursor is bound to its project
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return List[FlowSummary]{}, err
	}
	page, err := s.store.ListFlows(ctx, p.ID, q)
	if err != nil {
		return List[FlowSummary]{}, wrap("list flows", err)
	}
	return list(s, scope, q, page, Flow.Summary), nil
}

// Flow returns one flow of the project, secrets masked.
func (s *FlowService) Flow(ctx context.Context, p Project, id string) (Flow, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return Flow{}, wrap("get flow", err)
	}
	return s.withPollStatus(ctx, f.WithStats())
}

// CreateFlow validates a definition and stores it as a new INACTIVE flow.
func (s *FlowService) CreateFlow(ctx context.Context, p Project, in FlowInput) (Flow, error) {
	if in.Name == nil {
		return Flow{}, Invalid("name is required")
	}
	if in.Engine == nil {
		return Flow{}, Invalid("engine is required: allowed values are %s, %s", FlowBuilder, WorkflowBuilder)
	}
	now := s.clock()
	f := Flow{
		ID: s.newID(PrefixFlow), Project: p.ID, Status: FlowInactive, Engine: *in.Engine,
		Created: now, Updated: now, Version: 1, Steps: []Step{},
	}
	in.applyTo(&f)
	if err := setManagedBy(&f, in.ManagedBy); err != nil {
		return Flow{}, err
	}
	if err := s.validateFlow(ctx, &f); err != nil {
		return Flow{}, err
	}
	secrets, err := extractSecrets(&f, nil)
	if err != nil {
		return Flow{}, err
	}
	// Secrets first: a stored flow never points at a secret that is not there.
	// A new flow without secrets has none to write, nor an old one to
	// delete (a call to the secret store each, on AWS a paid one).
	if len(secrets) > 0 {
		if err := s.putFlowSecrets(ctx, f, secrets); err != nil {
			return Flow{}, err
		}
	}
	auditCreated(ctx, f.ID)
	s.firstVersion(ctx, &f)
	// The flows quota is checked by the store, in the write itself.
	f.FlowBounds = flowBounds(p)
	if err := s.store.CreateFlow(ctx, f); err != nil {
		if len(secrets) > 0 {
			s.dropFlowSecrets(ctx, f)
		}
		return Flow{}, wrap("create flow", s.nameRouteHolder(ctx, f, err))
	}
	return f.WithStats(), nil
}

// UpdateFlow changes the fields present in in. Secrets sent back as
// SecretMask keep their stored values.
func (s *FlowService) UpdateFlow(ctx context.Context, p Project, id string, in FlowInput) (Flow, error) {
	return s.modifyFlow(ctx, p, id, func(f *Flow) error {
		if in.Engine != nil && *in.Engine != f.Engine {
			return Invalid("engine cannot be changed (flow is %s): create a new flow instead", f.Engine)
		}
		old := *f
		in.applyTo(f)
		if in.Trigger != nil {
			keepWebhookPath(old, f)
		}
		if err := setManagedBy(f, in.ManagedBy); err != nil {
			return err
		}
		if !in.HasDefinition() {
			return validateMeta(f)
		}
		// Definition fields take effect at once: a new version, published.
		return s.publishDefinition(ctx, old, f, "")
	})
}

// publishDefinition validates the definition f now holds, stores its
// secrets and makes it the next version (publish), for modifyFlow to write.
func (s *FlowService) publishDefinition(ctx context.Context, old Flow, f *Flow, message string) error {
	if err := s.validateFlow(ctx, f); err != nil {
		return err
	}
	oldSecrets, err := s.storedFlowSecrets(ctx, old)
	if err != nil {
		return err
	}
	known := oldSecrets
	if f.DropDraft {
		known = promoteDraftSecrets(oldSecrets) // the draft goes live: its values too
	}
	secrets, err := extractSecrets(f, known)
	if err != nil {
		return err
	}
	keepOldSecrets(secrets, known)
	if f.DropDraft {
		secrets = withoutDraftSecrets(secrets)
	}
	s.publish(ctx, old, f, message)
	if !maps.Equal(secrets, oldSecrets) {
		return s.putFlowSecrets(ctx, *f, secrets)
	}
	return nil
}

// EnableFlow makes a flow's trigger fire.
func (s *FlowService) EnableFlow(ctx context.Context, p Project, id string) (Flow, error) {
	return s.modifyFlow(ctx, p, id, func(f *Flow) error {
		if f.Status != FlowActive {
			// Before the flow is active, so that no poll of it sees the
			// state of an earlier time it was enabled.
			if err := s.unprimePoll(ctx, *f); err != nil {
				return err
			}
		}
		f.Status = FlowActive
		return nil
	})
}

// DisableFlow stops a flow's trigger and its running runs, at their next
// step (flowstop.go).
func (s *FlowService) DisableFlow(ctx context.Context, p Project, id string) (Flow, error) {
	return s.modifyFlow(ctx, p, id, func(f *Flow) error {
		now := s.clock()
		f.Status, f.StoppedAt = FlowInactive, &now
		return nil
	})
}

// DeleteFlow removes a flow with its run history, schedule and secrets. It
// cannot be undone.
func (s *FlowService) DeleteFlow(ctx context.Context, p Project, id string) error {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return wrap("delete flow", err)
	}
	if err := s.store.DeleteFlow(ctx, p.ID, id); err != nil {
		return wrap("delete flow", err)
	}
	if s.scheduler != nil && scheduled(f) {
		if err := s.scheduler.RemoveSchedule(ctx, p.ID, id); err != nil {
			// The flow is gone, so a leftover schedule finds nothing to run.
			s.log.WarnContext(ctx, "remove schedule of deleted flow", "flow", id, "err", err)
		}
	}
	if mayHoldSecrets(f) {
		s.dropFlowSecrets(ctx, f)
	}
	return nil
}

// scheduled tells a flow the Scheduler keeps a schedule for while it is
// ACTIVE (SCHEDULE and POLL triggers): no other flow ever has one, so
// none is removed for them.
func scheduled(f Flow) bool {
	return f.Trigger.Type == TriggerSchedule || f.Trigger.Type == TriggerPoll
}

// mayHoldSecrets tells a flow whose definition or draft may have put
// values in the secret store.
func mayHoldSecrets(f Flow) bool {
	return f.HasDraft || len(secretFields(&f)) > 0
}

// Webhook describes the URL that triggers a webhook flow.
func (s *FlowService) Webhook(ctx context.Context, p Project, id string) (WebhookDescriptor, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return WebhookDescriptor{}, wrap("get webhook", err)
	}
	if f.Trigger.Type != TriggerWebhook || f.Trigger.Webhook == nil {
		return WebhookDescriptor{}, notWebhook(f)
	}
	d := WebhookDescriptor{FlowID: f.ID, Enabled: f.Status == FlowActive, Method: "POST",
		WebhookURL: WebhookURL(s.engineURL, s.workflowURL, f, false)}
	if f.Engine != FlowBuilder {
		d.Method = f.Trigger.Webhook.HTTPMethod
	}
	return d, nil
}

// WebhookSecurity returns a flow's IP allowlist.
func (s *FlowService) WebhookSecurity(ctx context.Context, p Project, id string) (WebhookSecurity, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return WebhookSecurity{}, wrap("get webhook security", err)
	}
	return WebhookSecurity{FlowID: f.ID, AllowedIPs: nonNil(f.AllowedIPs)}, nil
}

// SetWebhookSecurity replaces a flow's IP allowlist; an empty list lifts the
// restriction. ENTERPRISE projects only.
func (s *FlowService) SetWebhookSecurity(ctx context.Context, p Project, id string, ips []string) (WebhookSecurity, error) {
	if p.Plan != PlanEnterprise {
		return WebhookSecurity{}, Forbidden("PLAN_RESTRICTED", "IP allowlists need the ENTERPRISE plan; this project is on %s", p.Plan)
	}
	allowed, err := CanonicalAllowlist(ips)
	if err != nil {
		return WebhookSecurity{}, err
	}
	f, err := s.modifyFlow(ctx, p, id, func(f *Flow) error {
		if f.Trigger.Type != TriggerWebhook {
			return notWebhook(*f)
		}
		f.AllowedIPs = allowed
		return nil
	})
	if err != nil {
		return WebhookSecurity{}, err
	}
	return WebhookSecurity{FlowID: f.ID, AllowedIPs: nonNil(f.AllowedIPs)}, nil
}

// CanonicalAllowlist checks allowlist entries (IPv4 or IPv6 addresses, CIDR
// ranges) and returns them in canonical form without duplicates: an address
// as itself, a range with its host bits cleared.
func CanonicalAllowlist(ips []string) ([]string, error) {
	if len(ips) > MaxAllowedIPs {
		return nil, Invalid("allowedIPs holds %d entries; at most %d are allowed", len(ips), MaxAllowedIPs)
	}
	out := make([]string, 0, len(ips))
	for i, s := range ips {
		var canon string
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			canon = a.Unmap().String()
		} else if pr, err := netip.ParsePrefix(s); err == nil {
			canon = pr.Masked().String()
		} else {
			return nil, Invalid("allowedIPs[%d] = %q: want an IPv4 or IPv6 address (203.0.113.7) or a CIDR range (203.0.113.0/24)", i, s)
		}
		if !slices.Contains(out, canon) {
			out = append(out, canon)
		}
	}
	return out, nil
}

// modifyFlow reads a flow, applies change, and writes it back with the next
// version, retrying when another writer got there first.
func (s *FlowService) modifyFlow(ctx context.Context, p Project, id string, change func(*Flow) error) (Flow, error) {
	for attempt := 1; ; attempt++ {
		f, err := s.store.Flow(ctx, p.ID, id)
		if err != nil {
			return Flow{}, wrap("update flow", err)
		}
		wasScheduled := scheduled(f)
		if err := change(&f); err != nil {
			return Flow{}, err
		}
		f.Version++
		f.Updated = s.clock()
		f.FlowBounds = flowBounds(p) // a publish prunes versions past the plan's bound
		err = s.store.PutFlow(ctx, f)
		if IsFlowModified(err) && attempt < updateAttempts {
			continue
		}
		if err != nil {
			return Flow{}, wrap("update flow", s.nameRouteHolder(ctx, f, err))
		}
		// Only a flow that is or was a SCHEDULE or POLL flow has a
		// schedule to make, change or remove.
		if s.scheduler != nil && (wasScheduled || scheduled(f)) {
			if err := s.scheduler.SyncSchedule(ctx, f); err != nil {
				return Flow{}, wrap("sync schedule", err)
			}
		}
		return f.WithStats(), nil
	}
}

func notWebhook(f Flow) error {
	return Conflict("NOT_A_WEBHOOK_FLOW", "flow %q has a %s trigger, not a webhook", f.ID, f.Trigger.Type)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// flowSecrets loads the secret values of a stored flow, keyed by the paths
// of secretFields.
func (s *FlowService) flowSecrets(ctx context.Context, f Flow) (map[string]string, error) {
	return s.readFlowSecrets(ctx, f, s.secrets.Secret)
}

// readFlowSecrets is flowSecrets through a given read: RevealFlow's goes
// through the store's cache (cachedSecret, under the flow's version).
func (s *FlowService) readFlowSecrets(ctx context.Context, f Flow, read func(ctx context.Context, project, name string) ([]byte, error)) (map[string]string, error) {
	if len(secretFields(&f)) == 0 {
		return map[string]string{}, nil
	}
	raw, err := read(ctx, f.Project, FlowSecretName(f.ID))
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

// putFlowSecrets stores the secret values of f, or removes them when there
// are none.
func (s *FlowService) putFlowSecrets(ctx context.Context, f Flow, secrets map[string]string) error {
	if len(secrets) == 0 {
		return wrap("delete flow secrets", s.secrets.DeleteSecret(ctx, f.Project, FlowSecretName(f.ID)))
	}
	raw, err := json.Marshal(secrets)
	if err != nil {
		return wrap("store flow secrets", err)
	}
	return wrap("store flow secrets", s.secrets.PutSecret(ctx, f.Project, FlowSecretName(f.ID), raw))
}

func (s *FlowService) dropFlowSecrets(ctx context.Context, f Flow) {
	if err := s.secrets.DeleteSecret(ctx, f.Project, FlowSecretName(f.ID)); err != nil {
		s.log.WarnContext(ctx, "delete flow secrets", "flow", f.ID, "err", err)
	}
}

// RevealFlow returns f with its secret fields filled from the Secrets store,
// for the receivers and the engine. The result must never be encoded to a
// client or a log; Secret's marshaling masks it anyway.
func (s *FlowService) RevealFlow(ctx context.Context, f Flow) (Flow, error) {
	return s.revealFlow(ctx, f, false)
}

// revealFlow is RevealFlow; draft reveals the draft's own secret values
// (drafts.go) where it has them, for a test run of the draft.
func (s *FlowService) revealFlow(ctx context.Context, f Flow, draft bool) (Flow, error) {
	fields := secretFields(&f)
	if len(fields) == 0 {
		return f, nil
	}
	f.Trigger = cloneTrigger(f.Trigger)
	f.Steps, f.OnError = CloneSteps(f.Steps), CloneSteps(f.OnError)
	// The receivers and the engine reveal a flow on every delivery and
	// run: through the cache, under the version just read (flowStamp).
	values, err := s.readFlowSecrets(ctx, f, func(ctx context.Context, project, name string) ([]byte, error) {
		return cachedSecret(ctx, s.secrets, project, name, flowStamp(f))
	})
	if err != nil {
		return Flow{}, err
	}
	if draft {
		values = promoteDraftSecrets(values)
	}
	for path, ptr := range secretFields(&f) {
		v, ok := values[path]
		if !ok {
			return Flow{}, wrap("reveal flow secrets", errors.New("secret "+path+" of flow "+f.ID+" is missing"))
		}
		*ptr = Secret(v)
	}
	if err := s.variables.resolveSecretVars(ctx, f.Project, secretFields(&f)); err != nil {
		return Flow{}, err
	}
	return f, nil
}

func cloneTrigger(t Trigger) Trigger {
	if t.Webhook != nil {
		w := *t.Webhook
		if w.Authentication != nil {
			a := *w.Authentication
			w.Authentication = &a
		}
		if w.Signature != nil {
			sg := *w.Signature
			w.Signature = &sg
		}
		t.Webhook = &w
	}
	return t
}

// secretFields points at every non-empty secret field of f, keyed by a path
// that stays stable across updates (steps by name).
func secretFields(f *Flow) map[string]*Secret {
	m := map[string]*Secret{}
	add := func(path string, p *Secret) {
		if *p != "" {
			m[path] = p
		}
	}
	if w := f.Trigger.Webhook; w != nil {
		if a := w.Authentication; a != nil {
			add("trigger.authentication.password", &a.Password)
			add("trigger.authentication.value", &a.Value)
		}
		if sg := w.Signature; sg != nil {
			add("trigger.signature.secret", &sg.Secret)
		}
	}
	// Step names are unique in the whole flow, nested steps and onError
	// included: the name alone keeps the path stable.
	step := func(st *Step) {
		if sg := st.Signature; sg != nil {
			add("steps."+st.Name+".signature.secret", &sg.Secret)
		}
	}
	WalkSteps(f.Steps, step)
	WalkSteps(f.OnError, step)
	return m
}

// extractSecrets moves the secret values out of f, leaving SecretMask in
// their place. A field sent as SecretMask keeps the value in old; one with no
// old value to keep is an error, since the mask is not a secret.
func extractSecrets(f *Flow, old map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for path, ptr := range secretFields(f) {
		if ptr.Masked() {
			v, ok := old[path]
			if !ok {
				return nil, Invalid("%s: %q stands for a stored secret, but none is stored there; send the secret itself", path, SecretMask)
			}
			out[path] = v
		} else {
			out[path] = ptr.Reveal()
			*ptr = SecretMask
		}
	}
	return out, nil
}
