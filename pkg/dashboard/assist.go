package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"flowservice/pkg/automation"
)

// The editor's help as you type (static/editor.js) needs two things from
// the server: the flow schema of the API document, to check the definition
// and complete field names and step types, and the expressions a step may
// read, taken from the flow's captured sample and its last run's outputs.

// flowSchemaJSON is what GET /ui/flow-schema.json answers: the API
// document's component schemas and the one a definition is
// ({"root": "FlowCreate", "schemas": {...}}); empty schemas without a
// document.
func flowSchemaJSON(doc []byte) []byte {
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	_ = json.Unmarshal(doc, &d) // no document, no checks: the server still validates on save
	if d.Components.Schemas == nil {
		d.Components.Schemas = map[string]json.RawMessage{}
	}
	out, err := json.Marshal(struct {
		Root    string                     `json:"root"`
		Schemas map[string]json.RawMessage `json:"schemas"`
	}{"FlowCreate", d.Components.Schemas})
	if err != nil {
		return []byte(`{"root":"FlowCreate","schemas":{}}`)
	}
	return out
}

func (d *Dashboard) flowSchema(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(d.schema)
}

// maxExpressions bounds the insertable expressions the editor offers.
const maxExpressions = 120

// expressions lists what a flow's steps can read, as insertable
// templates: the captured sample's fields (trigger.body.…) and the fields
// of the outputs of the flow's last run (steps.<name>.…). Neither is an
// error when missing: a new flow has none.
func (d *Dashboard) expressions(ctx context.Context, p automation.Project, f automation.Flow) []string {
	var out []string
	if f.Trigger.Type == automation.TriggerWebhook {
		if s, err := d.svc.WebhookSample(ctx, p, f.ID); err == nil {
			for _, row := range flattenSchema("trigger.body", s.Schema) {
				if !strings.Contains(row.Path, "[]") {
					out = append(out, row.Path)
				}
			}
		}
	}
	if l, err := d.svc.ListRuns(ctx, p, f.ID, automation.PageRequest{}); err == nil && len(l.Data) > 0 {
		if run, err := d.svc.Run(ctx, p, f.ID, l.Data[0].ID); err == nil {
			// Steps in a SWITCH branch are read as steps.<name> too; a
			// loop body's are per item, not after the loop.
			var walk func(rs []automation.StepResult)
			walk = func(rs []automation.StepResult) {
				for _, s := range rs {
					out = append(out, outputPaths("steps."+s.Name, s.Output, 3)...)
					walk(s.Steps)
				}
			}
			walk(run.Steps)
		}
	}
	out = slices.Compact(out)
	if len(out) > maxExpressions {
		out = out[:maxExpressions]
	}
	return out
}

// outputPaths lists root and the object fields under it in a step's
// output, depth levels down, names in order.
func outputPaths(root string, raw json.RawMessage, depth int) []string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	var walk func(path string, v any, depth int)
	walk = func(path string, v any, depth int) {
		out = append(out, path)
		obj, ok := v.(map[string]any)
		if !ok || depth == 0 {
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			if isIdent(k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			walk(path+"."+k, obj[k], depth-1)
		}
	}
	walk(root, v, depth)
	return out
}

// isIdent reports whether k can follow a dot in an expression.
func isIdent(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && (i == 0 || !(c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}
