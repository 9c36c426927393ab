package dashboard

import (
	"bytes"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string // "flows" or "connections": the highlighted menu entry
	Base    string // public path of /ui, set by render
	CSRF    string
	Project *automation.Project
	Notice  string // a confirmation ("Flow enabled.")
	Error   string // a message the user may see
	Refresh string // a page to go on to at once (same-site navigation)
	Reload  int    // seconds after which the page reloads itself (0: never)
	Data    any
	// Role is the signed-in key's role: pages offer only what it may do
	// (Can); the forms' handlers check it again (access.go).
	Role automation.Role
	// Email names the signed-in person (the header shows it) and Projects
	// are theirs to switch between; both empty for a key's session.
	Email    string
	Projects []automation.ProjectRole
}

// Can reports whether the signed-in key's role grants the permission named
// ("read", "operate", "edit", "admin"), for templates.
func (v view) Can(p string) bool { return v.Role.Can(automation.Permission(p)) }

var funcs = template.FuncMap{
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return ""
	},
	// rate shows a flow's success rate, or "—" before its first finished
	// run: a flow that never ran has not failed every time.
	"rate": func(runCount int64, rate float64) string {
		if runCount == 0 {
			return "—"
		}
		return strconv.FormatFloat(rate, 'f', 1, 64) + "%"
	},
	"json": prettyJSON,
	"step": stepSettings,
	"add":  func(a, b int) int { return a + b },
	// group writes a count with thousands separators (1,234).
	"group": group,
	"pagerLinks": func(base, path string, p pager) any {
		return struct {
			URL   string
			Pager pager
		}{base + path, p}
	},
	"lower": func(s any) string { return strings.ToLower(toString(s)) },

	"waitHint": waitHint, // waiting.go
}

func toString(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case automation.FlowStatus:
		return string(s)
	case automation.RunStatus:
		return string(s)
	case automation.StepStatus:
		return string(s)
	case automation.ConnectionStatus:
		return string(s)
	}
	return ""
}

// parsePages reads every page under templates/: each NAME.html defines
// "content" and is rendered inside layout.html as page NAME, with the
// parts_*.html that pages share. A new page is a new file, listed nowhere.
func parsePages() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts_*.html"))
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	out := map[string]*template.Template{}
	for _, file := range files {
		name := strings.TrimSuffix(path.Base(file), ".html")
		if name == "layout" || strings.HasPrefix(name, "parts_") {
			continue
		}
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, file))
	}
	return out
}

// render writes page with status. A template failure after the status is
// written can only be logged.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	v.Base = d.base(r)
	if s := sessionOf(r.Context()); s != nil {
		v.Project, v.CSRF, v.Role = &s.project, s.csrf, s.principal.Role
		v.Email, v.Projects = s.principal.Email, s.projects
	}
	var buf bytes.Buffer
	if err := d.pages[page].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		d.log.ErrorContext(r.Context(), "render dashboard page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// prettyJSON indents a JSON document for a <pre>; anything else is shown
// as it is.
func prettyJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// schemaRow is one field of an inferred schema, flattened: "body.user.id"
// is an "integer".
type schemaRow struct {
	Path, Type string
	Truncated  bool
}

// flattenSchema lists every field of s under root, objects' properties in
// name order and array items as "[]".
func flattenSchema(root string, s *automation.Schema) []schemaRow {
	var rows []schemaRow
	var walk func(path string, s *automation.Schema)
	walk = func(path string, s *automation.Schema) {
		if s == nil {
			return
		}
		rows = append(rows, schemaRow{Path: path, Type: schemaType(s), Truncated: s.Truncated})
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			walk(path+"."+n, s.Properties[n])
		}
		if s.Items != nil {
			walk(path+"[]", s.Items)
		}
	}
	walk(root, s)
	return rows
}

func schemaType(s *automation.Schema) string {
	if s.Type != "" || len(s.AnyOf) == 0 {
		return s.Type
	}
	types := make([]string, 0, len(s.AnyOf))
	for _, a := range s.AnyOf {
		types = append(types, schemaType(a))
	}
	return strings.Join(types, " | ")
}
