package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"flowservice/pkg/automation"
)

// Project variables (docs/environments.md) and flow export: what a team
// needs to move flows between installations from the dashboard.

// variableNotices are the confirmations of the variables page.
var variableNotices = map[string]string{
	"saved":   "Variable saved. Runs read the new value from their next attempt.",
	"deleted": "Variable deleted. Runs that read it fail the step naming it.",
}

// variableRow is a variable as the page lists it: Shown is a plain
// variable's value, "" for a secret one.
type variableRow struct {
	automation.Variable
	Shown string
}

// variableForm is what the variable form shows again after an error; a
// value is never shown again (it may be secret).
type variableForm struct {
	Name   string
	Secret bool
}

func (d *Dashboard) environmentRoutes() {
	d.mux.Handle("GET /ui/variables", d.auth(d.variables))
	d.mux.Handle("POST /ui/variables", d.auth(d.setVariable))
	d.mux.Handle("POST /ui/variables/{name}/delete", d.auth(d.deleteVariable))
	d.mux.Handle("GET /ui/flows/{flowId}/export", d.auth(d.exportFlow))
}

func (d *Dashboard) variables(w http.ResponseWriter, r *http.Request) {
	d.renderVariables(w, r, http.StatusOK, variableNotices[r.URL.Query().Get("done")], "", variableForm{})
}

func (d *Dashboard) renderVariables(w http.ResponseWriter, r *http.Request, status int, note, errMsg string, form variableForm) {
	l, err := d.svc.ListVariables(r.Context(), project(r), automation.PageRequest{Limit: "100", Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rows := make([]variableRow, len(l.Data))
	for i, v := range l.Data {
		rows[i] = variableRow{Variable: v}
		if v.Value != nil && !v.Secret {
			rows[i].Shown = *v.Value
		}
	}
	d.render(w, r, status, "variables", view{Title: "Variables", Nav: "variables", Notice: note, Error: errMsg,
		Data: struct {
			Variables []variableRow
			Pager     pager
			Form      variableForm
		}{rows, newPager(r, nil, l.Cursor), form}})
}

// setVariable creates or replaces a variable from the form.
func (d *Dashboard) setVariable(w http.ResponseWriter, r *http.Request) {
	form := variableForm{Name: strings.TrimSpace(r.PostFormValue("name")), Secret: r.PostFormValue("secret") == "on"}
	value := r.PostFormValue("value")
	if _, err := d.svc.PutVariable(r.Context(), project(r), form.Name, automation.VariableInput{Value: &value, Secret: form.Secret}); err != nil {
		status, msg := d.problem(r, err)
		d.renderVariables(w, r, status, "", msg, form)
		return
	}
	d.redirect(w, r, "/ui/variables?done=saved")
}

func (d *Dashboard) deleteVariable(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.DeleteVariable(r.Context(), project(r), r.PathValue("name")); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/variables?done=deleted")
}

// exportFlow downloads the flow's portable document as <name>.flow.json,
// the file `flowctl apply` reads.
func (d *Dashboard) exportFlow(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, err := d.svc.Flow(ctx, project(r), r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	doc, err := d.svc.ExportFlow(ctx, project(r), f.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	name := f.Name + ".flow.json"
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+asciiName(name)+`"; filename*=UTF-8''`+url.PathEscape(name))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(prettyJSON(doc) + "\n"))
}

// asciiName is a file name safe inside a quoted header parameter.
func asciiName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '/' {
			return '_'
		}
		return r
	}, s)
}
