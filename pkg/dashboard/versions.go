package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"flowservice/pkg/automation"
)

// Versions and drafts (docs/api.md, "Versions"): the editor saves a draft,
// the flow page publishes or discards it, and the versions page lists the
// history, shows any two versions side by side and restores one.

func (d *Dashboard) versionRoutes() {
	d.mux.Handle("GET /ui/flows/{flowId}/versions", d.auth(d.versionsPage))
	d.mux.Handle("POST /ui/flows/{flowId}/publish", d.auth(d.publishDraft))
	d.mux.Handle("POST /ui/flows/{flowId}/draft/discard", d.auth(d.discardDraft))
	d.mux.Handle("GET /ui/flows/{flowId}/versions/{version}/restore", d.auth(d.confirmRestore))
	d.mux.Handle("POST /ui/flows/{flowId}/versions/{version}/restore", d.auth(d.restoreVersion))
}

// versionParam reads the {version} of a path: a 400 naming it unless it
// is a version number.
func versionParam(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || n < 1 {
		return 0, automation.InvalidCode("INVALID_PARAMETER", "version must be a version number, got %q", r.PathValue("version"))
	}
	return n, nil
}

// confirmRestore asks before a restore (a page, so it works without
// script): restoring replaces what runs, so one click must not do it.
func (d *Dashboard) confirmRestore(w http.ResponseWriter, r *http.Request) {
	n, err := versionParam(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ctx, p, id := r.Context(), project(r), r.PathValue("flowId")
	f, err := d.svc.Flow(ctx, p, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if _, err := d.svc.FlowVersion(ctx, p, id, n); err != nil {
		d.fail(w, r, err)
		return
	}
	v := strconv.FormatInt(n, 10)
	after := fmt.Sprintf(" is published again as a new version, which becomes the live one in place of version %d: new runs execute it; runs already started keep theirs.", f.LiveVersion)
	if f.HasDraft {
		after += " The saved draft stays as it is."
	}
	d.render(w, r, http.StatusOK, "confirm_delete", view{Title: "Restore version " + v, Nav: "flows", Data: deletion{
		Crumbs:  []crumb{{"/flows", "Flows"}, {"/flows/" + f.ID, f.Name}, {"/flows/" + f.ID + "/versions", "Versions"}},
		Heading: "Restore version " + v + " of “" + f.Name + "”?",
		Name:    f.Name, ID: "version " + v, Before: "The definition of ", After: after,
		Action: "/flows/" + f.ID + "/versions/" + v + "/restore", Button: "Restore version " + v,
		Cancel: "/flows/" + f.ID + "/versions?a=" + v + "&b=" + strconv.FormatInt(f.LiveVersion, 10),
	}})
}

// The confirmations of the version forms.
func init() {
	notices["draftsaved"] = "Draft saved: nothing that runs has changed. Try it through the test URL, then publish it."
	notices["published"] = "Draft published: new runs execute the new version; runs already started keep theirs."
	notices["discarded"] = "Draft discarded."
	notices["restored"] = "Version restored: a copy of it is now the live version."
}

func (d *Dashboard) publishDraft(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("flowId")
	req := automation.PublishRequest{Message: strings.TrimSpace(r.PostFormValue("message")), Force: r.PostFormValue("force") == "on"}
	if _, err := d.svc.Publish(r.Context(), project(r), id, req); err != nil {
		status, msg := d.problem(r, err)
		d.renderFlow(w, r, status, "", msg, nil, nil)
		return
	}
	d.redirect(w, r, "/ui/flows/"+id+"?done=published")
}

func (d *Dashboard) discardDraft(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("flowId")
	if err := d.svc.DiscardDraft(r.Context(), project(r), id); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/flows/"+id+"?done=discarded")
}

func (d *Dashboard) restoreVersion(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("flowId")
	n, err := versionParam(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if _, err := d.svc.RestoreVersion(r.Context(), project(r), id, n); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/flows/"+id+"?done=restored")
}

// versionsData is what versions.html shows.
type versionsData struct {
	Flow     automation.Flow
	Versions []automation.FlowVersion
	Pager    pager
	// A and B are the versions compared (A older, by default the one
	// before the live version), Rows their definitions side by side.
	A, B int64
	Rows []diffRow
	// Choices are the versions the diff's lists offer, newest first; All
	// shows every line, unchanged ones unfolded.
	Choices []int64
	All     bool
}

func (d *Dashboard) versionsPage(w http.ResponseWriter, r *http.Request) {
	ctx, p, id := r.Context(), project(r), r.PathValue("flowId")
	f, err := d.svc.Flow(ctx, p, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	l, err := d.svc.ListFlowVersions(ctx, p, id, automation.PageRequest{Limit: "20", Cursor: q.Get("cursor")})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := versionsData{Flow: f, Versions: l.Data, Pager: newPager(r, nil, l.Cursor),
		A: max(f.LiveVersion-1, 1), B: f.LiveVersion}
	for name, dst := range map[string]*int64{"a": &data.A, "b": &data.B} {
		if s := q.Get(name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 {
				d.fail(w, r, automation.InvalidCode("INVALID_PARAMETER", "%s must be a version number, got %q", name, s))
				return
			}
			*dst = n
		}
	}
	var texts [2][]string
	for i, n := range []int64{data.A, data.B} {
		v, err := d.svc.FlowVersion(ctx, p, id, n)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		texts[i] = definitionLines(v.Definition)
	}
	data.Rows = lineDiff(texts[0], texts[1])
	if data.All = q.Get("all") == "1"; !data.All {
		data.Rows = foldRows(data.Rows, diffContext)
	}
	for v := f.LiveVersion; v >= 1 && len(data.Choices) < maxVersionChoices; v-- {
		data.Choices = append(data.Choices, v)
	}
	d.render(w, r, http.StatusOK, "versions", view{Title: "Versions of " + f.Name, Nav: "flows", Data: data})
}

// definitionLines is a definition as the diff compares it: indented JSON,
// secrets masked, one line per element.
func definitionLines(def *automation.Definition) []string {
	b, err := json.MarshalIndent(def, "", "  ")
	if err != nil {
		return []string{fmt.Sprintf("(cannot show: %v)", err)}
	}
	return strings.Split(string(b), "\n")
}

// diffRow is one row of a side-by-side diff: a line of each side (0: none
// on that side) and whether they are the same, removed, added or changed,
// or Folded unchanged lines not shown.
type diffRow struct {
	Kind          string // "same", "del", "add", "change", "fold"
	Left, Right   string
	LeftN, RightN int
	Folded        int
}

// Bounds of the versions page: unchanged lines shown around a change, and
// the versions its lists offer.
const (
	diffContext       = 3
	maxVersionChoices = 500
)

// foldRows keeps context unchanged lines around each change and folds the
// rest of each unchanged run into one row that counts them.
func foldRows(rows []diffRow, context int) []diffRow {
	var out []diffRow
	for i := 0; i < len(rows); {
		if rows[i].Kind != "same" {
			out = append(out, rows[i])
			i++
			continue
		}
		j := i
		for j < len(rows) && rows[j].Kind == "same" {
			j++
		}
		keepHead, keepTail := context, context
		if i == 0 {
			keepHead = 0 // nothing changed above
		}
		if j == len(rows) {
			keepTail = 0
		}
		if n := j - i; n > keepHead+keepTail+1 {
			out = append(out, rows[i:i+keepHead]...)
			out = append(out, diffRow{Kind: "fold", Folded: n - keepHead - keepTail})
			out = append(out, rows[j-keepTail:j]...)
		} else {
			out = append(out, rows[i:j]...)
		}
		i = j
	}
	return out
}

// maxDiffLines bounds the lines a diff compares on each side: the table
// it builds takes (a+1)(b+1) ints, 32 MiB at this bound.
const maxDiffLines = 2000

// lineDiff aligns two texts by their longest common subsequence of lines
// and pairs what lies between matches as changes. Past maxDiffLines a side
// is cut, with a last line that says so.
func lineDiff(a, b []string) []diffRow {
	cut := func(s []string) []string {
		if len(s) > maxDiffLines {
			return append(s[:maxDiffLines:maxDiffLines], fmt.Sprintf("… %d more lines not compared", len(s)-maxDiffLines))
		}
		return s
	}
	a, b = cut(a), cut(b)
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var rows []diffRow
	var dels, adds []int // pending unmatched lines of a and b
	flush := func() {
		for k := 0; k < max(len(dels), len(adds)); k++ {
			row := diffRow{Kind: "change"}
			if k < len(dels) {
				row.Left, row.LeftN = a[dels[k]], dels[k]+1
			} else {
				row.Kind = "add"
			}
			if k < len(adds) {
				row.Right, row.RightN = b[adds[k]], adds[k]+1
			} else {
				row.Kind = "del"
			}
			rows = append(rows, row)
		}
		dels, adds = dels[:0], adds[:0]
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			flush()
			rows = append(rows, diffRow{Kind: "same", Left: a[i], Right: b[j], LeftN: i + 1, RightN: j + 1})
			i, j = i+1, j+1
		case j == len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			dels = append(dels, i)
			i++
		default:
			adds = append(adds, j)
			j++
		}
	}
	flush()
	return rows
}
