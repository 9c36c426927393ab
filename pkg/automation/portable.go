package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// Portable flow documents (docs/environments.md): a flow as a file that
// works on any installation. Connections are named, not addressed by ID;
// secrets typed inline show as SecretMask; secrets that name a variable
// ("{{ vars.NAME }}") are kept as such, since the name is no secret.
const (
	DocumentAPIVersion = "v1"
	DocumentKind       = "Flow"
)

// FlowDocument is the portable form of a flow: what GET …/export answers
// and POST /api/v1/flows/import takes.
type FlowDocument struct {
	APIVersion  string         `json:"apiVersion"`
	Kind        string         `json:"kind"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Engine      Engine         `json:"engine"`
	Definition  FlowDefinition `json:"definition"`
}

// FlowDefinition is what a flow runs: everything but its metadata.
type FlowDefinition struct {
	Trigger     *Trigger     `json:"trigger"`
	Steps       []Step       `json:"steps"`
	OnError     []Step       `json:"onError,omitempty"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Throttle    *Throttle    `json:"throttle,omitempty"`
}

// ManagedByApply marks a flow that `flowctl apply` created or updated:
// only such flows may be pruned by a later apply.
const ManagedByApply = "flowctl-apply"

// ExportFlow returns the portable document of a flow, as JSON.
func (s *FlowService) ExportFlow(ctx context.Context, p Project, id string) (json.RawMessage, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return nil, wrap("export flow", err)
	}
	f.Steps, f.OnError = CloneSteps(f.Steps), CloneSteps(f.OnError)
	// Connections by name: a connection gone keeps its ID, which an import
	// elsewhere then refuses, naming it.
	names := map[string]string{}
	var lookupErr error
	named := func(st *Step) {
		if st.ConnectionID == "" || lookupErr != nil {
			return
		}
		name, ok := names[st.ConnectionID]
		if !ok {
			c, err := s.store.Connection(ctx, p.ID, st.ConnectionID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				lookupErr = err
				return
			}
			name = c.Name
			names[st.ConnectionID] = name
		}
		if name != "" {
			st.Connection, st.ConnectionID = name, ""
		}
	}
	WalkSteps(f.Steps, named)
	WalkSteps(f.OnError, named)
	if lookupErr != nil {
		return nil, wrap("export flow: read connection", lookupErr)
	}
	if err := s.nameCalledFlows(ctx, f); err != nil {
		return nil, err
	}
	trigger := f.Trigger
	doc := FlowDocument{APIVersion: DocumentAPIVersion, Kind: DocumentKind, Name: f.Name, Description: f.Description,
		Engine: f.Engine, Definition: FlowDefinition{Trigger: &trigger, Steps: f.Steps, OnError: f.OnError,
			Concurrency: f.Concurrency, Throttle: f.Throttle}}
	if doc.Definition.Steps == nil {
		doc.Definition.Steps = []Step{}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, wrap("export flow", err)
	}
	secrets, err := s.flowSecrets(ctx, f)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for path, v := range secrets {
		if SecretVarRef(v) != "" {
			refs[path] = v
		}
	}
	if len(refs) == 0 {
		return raw, nil
	}
	return withSecretRefs(raw, refs)
}

// withSecretRefs writes the variable references among a flow's secrets
// into its exported document, where encoding masked them.
func withSecretRefs(raw json.RawMessage, refs map[string]string) (json.RawMessage, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, wrap("export flow", err)
	}
	def, _ := doc["definition"].(map[string]any)
	set := func(obj any, key, value string) {
		if m, ok := obj.(map[string]any); ok {
			if _, has := m[key]; has {
				m[key] = value
			}
		}
	}
	webhook := func() map[string]any {
		t, _ := def["trigger"].(map[string]any)
		w, _ := t["webhook"].(map[string]any)
		return w
	}
	for path, v := range refs {
		switch {
		case path == "trigger.authentication.password":
			set(webhook()["authentication"], "password", v)
		case path == "trigger.authentication.value":
			set(webhook()["authentication"], "value", v)
		case path == "trigger.signature.secret":
			set(webhook()["signature"], "secret", v)
		case strings.HasPrefix(path, "steps.") && strings.HasSuffix(path, ".signature.secret"):
			name := strings.TrimSuffix(strings.TrimPrefix(path, "steps."), ".signature.secret")
			for _, list := range []string{"steps", "onError"} {
				if st := findStep(def[list], name); st != nil {
					set(st["signature"], "secret", v)
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, wrap("export flow", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// findStep finds a step by name in decoded JSON steps, at any depth.
func findStep(list any, name string) map[string]any {
	steps, _ := list.([]any)
	for _, x := range steps {
		st, _ := x.(map[string]any)
		if st == nil {
			continue
		}
		if st["name"] == name {
			return st
		}
		for _, k := range []string{"steps", "default"} {
			if found := findStep(st[k], name); found != nil {
				return found
			}
		}
		cases, _ := st["cases"].([]any)
		for _, c := range cases {
			if cm, ok := c.(map[string]any); ok {
				if found := findStep(cm["steps"], name); found != nil {
					return found
				}
			}
		}
	}
	return nil
}

// ImportFlow creates an INACTIVE flow from a portable document. A secret
// given as SecretMask has no stored value to stand for: 400 naming it.
func (s *FlowService) ImportFlow(ctx context.Context, p Project, doc FlowDocument) (Flow, error) {
	if err := checkDocument(doc); err != nil {
		return Flow{}, err
	}
	in := FlowInput{Name: &doc.Name, Engine: &doc.Engine, Description: &doc.Description,
		Trigger: doc.Definition.Trigger, Steps: &doc.Definition.Steps}
	if doc.Definition.OnError != nil {
		in.OnError = &doc.Definition.OnError
	}
	if doc.Definition.Steps == nil {
		in.Steps = nil
	}
	in.Concurrency = Nullable[Concurrency]{Set: true, Value: doc.Definition.Concurrency}
	in.Throttle = Nullable[Throttle]{Set: true, Value: doc.Definition.Throttle}
	f, err := s.CreateFlow(ctx, p, in)
	if err != nil {
		return Flow{}, inDocument(err)
	}
	return f, nil
}

// inDocument is a validation error as the document's fields are named:
// definition fields are nested under "definition" there.
func inDocument(err error) error {
	var e *Error
	if errors.As(err, &e) && errors.Is(err, ErrInvalid) && definitionField(e.Message) {
		return &Error{Kind: e.Kind, Code: e.Code, Message: "definition." + e.Message}
	}
	return err
}

// checkDocument checks a document's envelope.
func checkDocument(doc FlowDocument) error {
	if doc.APIVersion != DocumentAPIVersion {
		return Invalid("apiVersion %q: the document version this service reads is %q", ClipID(doc.APIVersion), DocumentAPIVersion)
	}
	if doc.Kind != DocumentKind {
		return Invalid("kind %q: want %q", ClipID(doc.Kind), DocumentKind)
	}
	return nil
}

// definitionField reports whether a validation message names a field of
// the definition, which the document nests under "definition".
func definitionField(msg string) bool {
	for _, f := range []string{"trigger", "steps", "onError", "concurrency", "throttle"} {
		if strings.HasPrefix(msg, f+".") || strings.HasPrefix(msg, f+"[") || strings.HasPrefix(msg, f+" ") || strings.HasPrefix(msg, f+":") {
			return true
		}
	}
	return false
}

// setManagedBy applies a ManagedBy of a create or update, when given.
func setManagedBy(f *Flow, v *string) error {
	if v == nil {
		return nil
	}
	if *v != "" && *v != ManagedByApply {
		return Invalid("managedBy %q: allowed values are %q and \"\"", ClipID(*v), ManagedByApply)
	}
	f.ManagedBy = *v
	return nil
}

// nameCalledFlows writes beside each CALL_FLOW step's flowId the called
// flow's name (Step.Flow): the ID means nothing on another installation,
// where saving the document resolves the name instead. A called flow that
// is gone keeps its ID alone, which the other installation then refuses.
func (s *FlowService) nameCalledFlows(ctx context.Context, f Flow) error {
	names := map[string]string{f.ID: f.Name}
	var lookupErr error
	name := func(st *Step) {
		if st.Type != StepCallFlow || st.FlowID == "" || lookupErr != nil {
			return
		}
		n, ok := names[st.FlowID]
		if !ok {
			g, err := s.store.Flow(ctx, f.Project, st.FlowID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				lookupErr = err
				return
			}
			n = g.Name
			names[st.FlowID] = n
		}
		st.Flow = n
	}
	WalkSteps(f.Steps, name)
	WalkSteps(f.OnError, name)
	if lookupErr != nil {
		return wrap("export flow: read called flow", lookupErr)
	}
	return nil
}

// resolveCalledFlow turns a CALL_FLOW step's flow name (Step.Flow, as a
// portable document carries it) into the ID of the project's one flow of
// that name, which replaces any flowId the step has: that ID came from the
// installation the document was exported from. The flow being saved
// answers to its own name, so a flow may call itself by name even before
// it exists. None or several of that name: 400 naming the step.
func (s *flowValidator) resolveCalledFlow(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.Flow == "" {
		return nil
	}
	var ids []string
	if st.Flow == f.Name {
		ids = append(ids, f.ID)
	}
	q := ListQuery{Limit: MaxPageSize}
	for {
		page, err := s.store.ListFlows(ctx, f.Project, q)
		if err != nil {
			return wrap("resolve called flow", err)
		}
		for _, g := range page.Items {
			if g.Name == st.Flow && g.ID != f.ID {
				ids = append(ids, g.ID)
			}
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	switch len(ids) {
	case 0:
		return Invalid("%s.flow %q (step %q): this project has no flow of that name: create it first, or give flowId instead",
			at, ClipID(st.Flow), ClipID(st.Name))
	case 1:
		st.FlowID, st.Flow = ids[0], ""
		return nil
	}
	return Invalid("%s.flow %q (step %q): %d flows of this project have that name (%s): rename all but one, or give flowId instead",
		at, ClipID(st.Flow), ClipID(st.Name), len(ids), strings.Join(ids, ", "))
}

// DocumentInput is the update that makes a flow match a portable
// document, as `flowctl apply` sends it: every part of the definition set,
// a part the document leaves out set to what a new flow would have (no
// trigger: the default webhook; no onError, concurrency or throttle: none),
// so that leaving a part out and writing its default mean the same.
func DocumentInput(doc FlowDocument) FlowInput {
	def := doc.Definition
	trigger := Trigger{}
	if def.Trigger != nil {
		trigger = *def.Trigger
	}
	steps, onError := def.Steps, def.OnError
	if steps == nil {
		steps = []Step{}
	}
	if onError == nil {
		onError = []Step{}
	}
	desc := doc.Description
	return FlowInput{Description: &desc, Trigger: &trigger, Steps: &steps, OnError: &onError,
		Concurrency: Nullable[Concurrency]{Set: true, Value: def.Concurrency},
		Throttle:    Nullable[Throttle]{Set: true, Value: def.Throttle}}
}

// FlowComparison is the answer of POST /api/v1/flows/{id}/compare: whether
// updating the flow with a document (DocumentInput) would change it, and
// which parts ("description", "definition.steps", ...).
type FlowComparison struct {
	Changed     bool     `json:"changed"`
	Differences []string `json:"differences"`
}

// CompareFlow reports what updating the flow with doc would change. Both
// sides are compared as the service stores them: the document goes through
// the update's own validation, which fills in every default (a step's
// method, the webhook's, a called flow's ID from its name), so that field
// order, absent-versus-default and a called flow's ID on the installation
// the document came from make no difference. Secrets are compared by
// value here, where the stored values are: SecretMask keeps the stored
// value (no change), a variable reference or a value typed inline is the
// same only if it is what is stored. Nothing is written and no value is
// shown.
func (s *FlowService) CompareFlow(ctx context.Context, p Project, id string, doc FlowDocument) (FlowComparison, error) {
	if err := checkDocument(doc); err != nil {
		return FlowComparison{}, err
	}
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return FlowComparison{}, wrap("compare flow", err)
	}
	if doc.Engine != "" && doc.Engine != f.Engine {
		return FlowComparison{}, Invalid("engine %q: the flow is %s, and a flow's engine cannot change", ClipID(string(doc.Engine)), f.Engine)
	}
	next := f
	in := DocumentInput(doc)
	in.applyTo(&next)
	keepWebhookPath(f, &next)
	if err := s.validateFlow(ctx, &next); err != nil {
		return FlowComparison{}, inDocument(err)
	}
	stored, err := s.storedFlowSecrets(ctx, f)
	if err != nil {
		return FlowComparison{}, err
	}
	secrets, err := extractSecrets(&next, stored)
	if err != nil {
		return FlowComparison{}, err
	}
	diff := map[string]bool{"description": f.Description != next.Description}
	was, will := DefinitionOf(f).shown(), DefinitionOf(next).shown()
	if len(was.OnError) == 0 && len(will.OnError) == 0 {
		was.OnError, will.OnError = nil, nil // none stored, [] sent: the same
	}
	for part, pair := range map[string][2]any{
		"trigger": {was.Trigger, will.Trigger}, "steps": {was.Steps, will.Steps}, "onError": {was.OnError, will.OnError},
		"concurrency": {was.Concurrency, will.Concurrency}, "throttle": {was.Throttle, will.Throttle},
	} {
		a, errA := json.Marshal(pair[0])
		b, errB := json.Marshal(pair[1])
		if err := errors.Join(errA, errB); err != nil {
			return FlowComparison{}, wrap("compare flow", err)
		}
		diff["definition."+part] = !bytes.Equal(a, b)
	}
	for path, v := range secrets {
		if old, ok := stored[path]; !ok || old != v {
			part := "definition.trigger"
			if strings.HasPrefix(path, "steps.") {
				// By name, which onError steps share with steps.
				part = "definition.steps"
				if findNamed(next.OnError, path) {
					part = "definition.onError"
				}
			}
			diff[part] = true
		}
	}
	out := FlowComparison{Differences: []string{}}
	for _, part := range []string{"description", "definition.trigger", "definition.steps", "definition.onError", "definition.concurrency", "definition.throttle"} {
		if diff[part] {
			out.Differences = append(out.Differences, part)
		}
	}
	out.Changed = len(out.Differences) > 0
	return out, nil
}

// findNamed reports whether a secret path ("steps.NAME.…") names a step
// of steps, at any depth.
func findNamed(steps []Step, path string) bool {
	found := false
	WalkSteps(steps, func(st *Step) { found = found || strings.HasPrefix(path, "steps."+st.Name+".") })
	return found
}

// keepWebhookPath gives a workflow builder webhook that an update leaves
// without a path the path the flow has, instead of the random one a new
// flow gets: its URL stays the one its senders know, and a document
// applied again (without a path) is the same flow, not a moved one.
func keepWebhookPath(old Flow, f *Flow) {
	ow, t := old.Trigger.Webhook, &f.Trigger
	if ow == nil || ow.Path == "" || f.Engine != WorkflowBuilder {
		return
	}
	webhook := t.Type == TriggerWebhook || (t.Type == "" && t.Schedule == nil && t.Poll == nil)
	if !webhook || (t.Webhook != nil && t.Webhook.Path != "") {
		return
	}
	if t.Webhook == nil {
		t.Webhook = &Webhook{}
	} else {
		w := *t.Webhook
		t.Webhook = &w
	}
	t.Webhook.Path = ow.Path
}
