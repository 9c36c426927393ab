package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"flowservice/pkg/automation"
)

// The flow editor is a JSON textarea: the definition as the API takes it,
// validated by the same Service call, with the Service's message shown
// under the field it names and the API document's field help beside it.

// editorData is what flow_edit.html shows.
type editorData struct {
	Flow       *automation.Flow // nil for a new flow
	Definition string
	Error      string // the Service's message
	ErrorField string // the field it names, when it names one
	ErrorRest  string // the message after the field it starts with ("" if it does not)
	ErrorLine  int    // where the error is in Definition (0: unknown)
	ErrorCol   int
	HelpField  string // ErrorField as the help lists it: steps[].url
	Help       []fieldHelp
	// Expressions are what steps may read (the sample's fields, the last
	// run's outputs), offered for insertion as {{ … }}.
	Expressions []string
	// Connections are offered for an HTTP step's connectionId.
	Connections []automation.Connection
	// Flows are offered for a CALL_FLOW step's flowId.
	Flows []automation.FlowSummary
	// Forms is the visual editor's table (forms.go), as JSON.
	Forms string
	// ExpressionsJSON is Expressions as JSON, for the field picker.
	ExpressionsJSON string
	// Apps is the app catalog as ACTION's form reads it (appsJSON).
	Apps string
	// Starts and Gallery are offered by "New flow" (gallery.go); Start is
	// the start chosen.
	Starts  []flowStart
	Gallery []galleryFlow
	Start   string
}

// fieldHelp is one field of a flow definition with its description from the
// API document.
type fieldHelp struct {
	Path, Text string
	Values     []string // allowed values, when the document lists them
}

// fieldHelpFrom reads the field descriptions of a flow definition from an
// OpenAPI document: FlowCreate and the schemas it refers to. A missing or
// unreadable document gives no help, never an error.
func fieldHelpFrom(doc []byte) []fieldHelp {
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	type schema struct {
		Ref         string             `json:"$ref"`
		Description string             `json:"description"`
		Enum        []string           `json:"enum"`
		Properties  map[string]*schema `json:"properties"`
		Items       *schema            `json:"items"`
	}
	resolve := func(s *schema) *schema {
		for i := 0; s != nil && s.Ref != "" && i < 5; i++ {
			var next schema
			if json.Unmarshal(d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")], &next) != nil {
				return nil
			}
			if next.Description == "" {
				next.Description = s.Description
			}
			s = &next
		}
		return s
	}
	var out []fieldHelp
	seen := map[string]bool{}
	var walk func(path string, s *schema, depth int)
	walk = func(path string, s *schema, depth int) {
		s = resolve(s)
		if s == nil || depth > 4 {
			return
		}
		if path != "" && !seen[path] {
			seen[path] = true
			if s.Description != "" || len(s.Enum) > 0 {
				out = append(out, fieldHelp{Path: path, Text: s.Description, Values: s.Enum})
			}
		}
		if s.Items != nil {
			walk(path+"[]", s.Items, depth+1)
		}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		if path == "" {
			// A definition's fields in the order one writes them, not
			// alphabetically: steps and trigger before the rest.
			sort.SliceStable(names, func(i, j int) bool { return topOrder(names[i]) < topOrder(names[j]) })
		}
		for _, n := range names {
			p := n
			if path != "" {
				p = path + "." + n
			}
			walk(p, s.Properties[n], depth+1)
		}
	}
	walk("", &schema{Ref: "#/components/schemas/FlowCreate"}, 0)
	return out
}

// topOrder ranks a definition's top-level fields for the help.
func topOrder(name string) int {
	if i := slices.Index([]string{"name", "engine", "trigger", "steps", "onError", "description"}, name); i >= 0 {
		return i
	}
	return 99
}

// fieldOf is the field a validation message names: its leading path such
// as "steps[1].url" or "trigger.webhook.path", when it starts with a field
// of a definition, and the rest of the message after that path. The
// Service names a step by index and name: "steps[0] (notify).url"; an
// unknown field is named with where it is: `unknown field "ulr" in steps[1]`.
var (
	fieldRE        = regexp.MustCompile(`^"?((?:name|engine|description|trigger|steps|onError)(?:\[\d+\](?: \([^)]{0,200}\))?)?(?:\.[A-Za-z]+(?:\[\d+\](?: \([^)]{0,200}\))?)?)*)`)
	unknownFieldRE = regexp.MustCompile(`unknown field "([^"]{1,100})"(?: in ([^\s:]{1,300}))?`)
	stepNameRE     = regexp.MustCompile(` \([^)]*\)`)
	indexRE        = regexp.MustCompile(`\[\d+\]`)
)

func fieldOf(msg string) (field, rest string) {
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		// The path names the field: the rest need not name it again.
		rest = ": " + strings.Replace(msg, m[0], "unknown field", 1)
		if m[2] != "" {
			return m[2] + "." + m[1], rest
		}
		return m[1], rest
	}
	if m := fieldRE.FindStringSubmatch(msg); m != nil {
		return stepNameRE.ReplaceAllString(m[1], ""), strings.TrimPrefix(msg[len(m[0]):], `"`)
	}
	return "", ""
}

// decodeDefinition reads the editor's JSON strictly, as the API does: one
// object, no unknown fields. Messages never quote values.
func decodeDefinition(text string) (automation.FlowInput, error) {
	var in automation.FlowInput
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	err := dec.Decode(&in)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return in, automation.Invalid("the definition holds more after its JSON object: keep exactly one object")
		}
		return in, nil
	case errors.As(err, &syn):
		line, col := automation.JSONPosition([]byte(text), syn.Offset)
		return in, automation.Invalid("the definition is not valid JSON at line %d, column %d: %s", line, col, syn.Error())
	case errors.As(err, &typ):
		return in, automation.Invalid("%s: want a JSON %s here", typ.Field, typ.Type.Kind())
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		quoted := strings.TrimPrefix(err.Error(), "json: unknown field ")
		key, _ := strconv.Unquote(quoted)
		if at := keyPath(text, key); strings.Contains(at, ".") {
			return in, automation.Invalid("unknown field %s in %s: check its spelling against the field help",
				quoted, at[:strings.LastIndex(at, ".")])
		}
		return in, automation.Invalid("unknown field %s: check its spelling against the field help", quoted)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return in, automation.Invalid("the definition is not valid JSON: it ends before its object does (a missing } or ]?)")
	case errors.Is(err, io.EOF):
		return in, automation.Invalid("the definition is empty: write a JSON object")
	}
	return in, automation.Invalid("the definition is not a JSON object")
}

// errorPosition is where an editor message points in text: the syntax
// error when text is not JSON, else the field the message names.
func errorPosition(text, field string) (line, col int) {
	var v any
	var syn *json.SyntaxError
	if err := json.Unmarshal([]byte(text), &v); errors.As(err, &syn) {
		return automation.JSONPosition([]byte(text), syn.Offset)
	}
	if field == "" {
		return 0, 0
	}
	line, col, _ = locateField(text, field)
	return line, col
}

// definitionOf is a flow's definition as the editor shows it: the fields
// an update takes, secrets masked (sending the mask back keeps them).
func definitionOf(f automation.Flow) string {
	// The engine is shown (it cannot change) because the forms depend on
	// it: a WORKFLOW_BUILDER webhook's path, method and answer are fields
	// of its trigger's form only on that engine.
	b, err := json.MarshalIndent(struct {
		Name        string             `json:"name"`
		Engine      automation.Engine  `json:"engine,omitempty"`
		Description string             `json:"description"`
		Trigger     automation.Trigger `json:"trigger"`
		Steps       []automation.Step  `json:"steps"`
		OnError     []automation.Step  `json:"onError,omitempty"`
	}{f.Name, f.Engine, f.Description, f.Trigger, f.Steps, f.OnError}, "", "  ")
	if err != nil {
		return "{}"
	}
	return string(b)
}

func (d *Dashboard) renderEditor(w http.ResponseWriter, r *http.Request, status int, data editorData, errMsg string) {
	data.Help = d.help
	if l, err := d.svc.ListConnections(r.Context(), project(r), automation.PageRequest{Limit: "100"}); err == nil {
		data.Connections = l.Data // a help: without it the ID is typed
	}
	if l, err := d.svc.ListFlows(r.Context(), project(r), automation.PageRequest{Limit: "100"}); err == nil {
		data.Flows = l.Data // for CALL_FLOW's flowId, as connections are for connectionId
	}
	if data.Error != "" {
		data.ErrorField, data.ErrorRest = fieldOf(data.Error)
		data.HelpField = indexRE.ReplaceAllString(data.ErrorField, "[]")
		data.ErrorLine, data.ErrorCol = errorPosition(data.Definition, data.ErrorField)
	}
	title := "New flow"
	if data.Flow != nil {
		title = "Edit " + data.Flow.Name
		data.Expressions = d.expressions(r.Context(), project(r), *data.Flow)
	} else {
		data.Starts, data.Gallery = flowStarts, gallery
	}
	data.Forms = formsJSON()
	data.Apps = appsJSON(d.svc.ListApps())
	if b, err := json.Marshal(data.Expressions); err == nil && data.Expressions != nil {
		data.ExpressionsJSON = string(b)
	} else {
		data.ExpressionsJSON = "[]"
	}
	d.render(w, r, status, "flow_edit", view{Title: title, Nav: "flows", Error: errMsg, Data: data})
}

// newFlow opens the editor on a start (?start=webhook-reply, the
// default): what starts the flow sets its engine and response mode.
func (d *Dashboard) newFlow(w http.ResponseWriter, r *http.Request) {
	st, ok := startDefinition(r.URL.Query().Get("start"))
	if !ok {
		d.fail(w, r, automation.Invalid("start %q: want one of webhook-reply, webhook, schedule, poll, called", r.URL.Query().Get("start")))
		return
	}
	d.renderEditor(w, r, http.StatusOK, editorData{Definition: uniquePaths(st.Definition), Start: st.ID}, "")
}

func (d *Dashboard) createFlow(w http.ResponseWriter, r *http.Request) {
	text := r.PostFormValue("definition")
	in, err := decodeDefinition(text)
	var f automation.Flow
	if err == nil {
		f, err = d.svc.CreateFlow(r.Context(), project(r), in)
	}
	if err != nil {
		status, msg := d.problem(r, err)
		d.renderEditor(w, r, status, editorData{Definition: text, Error: msg}, "")
		return
	}
	d.redirect(w, r, "/ui/flows/"+f.ID+"?done=flowcreated")
}

func (d *Dashboard) editFlow(w http.ResponseWriter, r *http.Request) {
	f, err := d.svc.Flow(r.Context(), project(r), r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	shown := f
	if f.HasDraft {
		// The editor edits the draft (versions.go), on the live metadata.
		dr, err := d.svc.Draft(r.Context(), project(r), f.ID)
		if err != nil && !automation.IsNotFound(err) {
			d.fail(w, r, err)
			return
		} else if err == nil {
			dr.Definition.ApplyTo(&shown)
		}
	}
	d.renderEditor(w, r, http.StatusOK, editorData{Flow: &f, Definition: definitionOf(shown)}, "")
}

func (d *Dashboard) updateFlow(w http.ResponseWriter, r *http.Request) {
	f, err := d.svc.Flow(r.Context(), project(r), r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	text := r.PostFormValue("definition")
	in, err := decodeDefinition(text)
	// The definition is saved as the flow's draft: nothing that runs
	// changes until it is published (versions.go). Name and description
	// are not versioned and change at once.
	draft := in.HasDefinition()
	if err == nil && draft {
		_, err = d.svc.SaveDraft(r.Context(), project(r), f.ID, in.Draft())
	}
	if meta := (automation.FlowInput{Name: in.Name, Engine: in.Engine, Description: in.Description, ManagedBy: in.ManagedBy}); err == nil &&
		(meta.Name != nil || meta.Engine != nil || meta.Description != nil || meta.ManagedBy != nil) {
		_, err = d.svc.UpdateFlow(r.Context(), project(r), f.ID, meta)
	}
	if err != nil {
		status, msg := d.problem(r, err)
		d.renderEditor(w, r, status, editorData{Flow: &f, Definition: text, Error: msg}, "")
		return
	}
	done := "flowsaved"
	if draft {
		done = "draftsaved"
	}
	d.redirect(w, r, "/ui/flows/"+f.ID+"?done="+done)
}

func (d *Dashboard) confirmDeleteFlow(w http.ResponseWriter, r *http.Request) {
	f, err := d.svc.Flow(r.Context(), project(r), r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "confirm_delete", view{Title: "Delete " + f.Name, Nav: "flows", Data: deletion{
		Crumbs: []crumb{{"/flows", "Flows"}, {"/flows/" + f.ID, f.Name}},
		Name:   f.Name, ID: f.ID,
		Before: "The flow ", After: " and its whole run history are deleted; its webhook answers 404 from now on.",
		Action: "/flows/" + f.ID + "/delete", Button: "Delete flow", Cancel: "/flows/" + f.ID,
	}})
}

func (d *Dashboard) deleteFlow(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.DeleteFlow(r.Context(), project(r), r.PathValue("flowId")); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/flows?done=flowdeleted")
}

// retryRun starts a new run with the trigger data of a run: from the start,
// or (form field from=FAILED_STEP) resuming at the step that failed.
func (d *Dashboard) retryRun(w http.ResponseWriter, r *http.Request) {
	flowID := r.PathValue("flowId")
	req := automation.RetryRequest{From: r.PostFormValue("from")}
	run, err := d.svc.RetryRun(r.Context(), project(r), flowID, r.PathValue("runId"), req)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	done := "retried"
	if req.From == automation.RetryFromFailedStep {
		done = "resumed"
	}
	d.redirect(w, r, fmt.Sprintf("/ui/flows/%s/runs/%s?done=%s", flowID, run.ID, done))
}

// stepSettings is a step as the flow page shows it: its settings as JSON,
// secrets masked by their type.
//
// A SWITCH's cases show their conditions only: their steps are listed
// apart (shallow), and a case's "steps": null read as a case with none.
func stepSettings(s automation.Step) string {
	var v any = s
	if len(s.Cases) > 0 {
		type when struct {
			When string `json:"when"`
		}
		cases := make([]when, len(s.Cases))
		for i, c := range s.Cases {
			cases[i] = when{c.When}
		}
		raw, err := json.Marshal(s)
		var m map[string]json.RawMessage
		if err == nil && json.Unmarshal(raw, &m) == nil {
			m["cases"], _ = json.Marshal(cases) // a slice of one string field always marshals
			v = orderedStep{s, m}
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

// orderedStep marshals a step's fields as m holds them, in the step's own
// field order (name and type first), not a map's.
type orderedStep struct {
	s automation.Step
	m map[string]json.RawMessage
}

func (o orderedStep) MarshalJSON() ([]byte, error) {
	raw, err := json.Marshal(o.s)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var b strings.Builder
	b.WriteString("{")
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if !first {
			b.WriteString(",")
		}
		first = false
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteString(":")
		b.Write(o.m[key])
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}
