package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// auditPageSize is the entries a page of the audit log shows.
const auditPageSize = 50

// auditActions are what the action filter offers (a prefix keeps every
// action under it); the field takes any other text too.
var auditActions = []string{
	"flow", "flow.create", "flow.update", "flow.delete", "flow.enable", "flow.disable", "flow.publish", "flow.restore",
	"flow.draft", "flow.test_step", "flow.send_test", "run", "run.retry", "run.cancel", "run.replay",
	"connection", "variable", "subscription", "key", "key.create", "key.revoke", "session", "session.signin", "session.signin_failed",
}

// auditFilter is the audit page's form, as typed.
type auditFilter struct {
	Action, Actor, Since, Until string
}

// auditRow is an entry with what its resource links to.
type auditRow struct {
	automation.AuditEntry
	Name string // the resource's name when it has one ("" when gone or nameless)
	Href string // its page under /ui, "" for none
}

// auditPage is the project's audit log, newest first (GET /api/v1/audit's
// entries, a page at a time), filtered by action, actor (a key) and time;
// each resource links to its page with its name.
func (d *Dashboard) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := auditFilter{Action: strings.TrimSpace(q.Get("action")), Actor: strings.TrimSpace(q.Get("actor")),
		Since: q.Get("since"), Until: q.Get("until")}
	since, err := formTime("since", f.Since)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	until, err := formTime("until", f.Until)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l, err := d.svc.AuditLog(r.Context(), project(r), automation.AuditSearch{
		PageRequest: automation.PageRequest{Limit: strconv.Itoa(auditPageSize), Cursor: q.Get("cursor")},
		Since:       since, Until: until, Action: f.Action, Actor: f.Actor,
	})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	keys, err := d.svc.ProjectKeys(r.Context(), project(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	next := ""
	if l.Cursor != nil {
		v := url.Values{"cursor": {*l.Cursor}}
		for k, s := range map[string]string{"action": f.Action, "actor": f.Actor, "since": f.Since, "until": f.Until} {
			if s != "" {
				v.Set(k, s)
			}
		}
		next = "?" + v.Encode()
	}
	d.render(w, r, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Data: struct {
		Entries  []auditRow
		Filter   auditFilter
		Actions  []string
		Keys     []automation.APIKey
		Next     string
		Paged    bool
		Filtered bool
		Scan     int
	}{d.auditRows(r, l.Data), f, auditActions, sortedKeys(keys), next, q.Get("cursor") != "",
		f != (auditFilter{}), automation.MaxAuditScan}})
}

// formTime reads a time of the filter form: a browser's datetime-local
// ("2026-05-01T09:30", read as UTC) or RFC 3339; "" is none. It returns
// RFC 3339 for the Service.
func formTime(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC().Format(time.RFC3339), nil
		}
	}
	return "", automation.InvalidCode("INVALID_PARAMETER", "%s must be a time such as 2026-05-01T09:30 (UTC), got %q", field, automation.ClipID(v))
}

// auditRows finds each resource's page and name: one read per distinct
// flow or connection of the page (at most auditPageSize), none for the
// rest.
func (d *Dashboard) auditRows(r *http.Request, es []automation.AuditEntry) []auditRow {
	ctx, p := r.Context(), project(r)
	flows, conns := map[string]string{}, map[string]string{}
	flowName := func(id string) string {
		if n, ok := flows[id]; ok {
			return n
		}
		n := ""
		if f, err := d.svc.Flow(ctx, p, id); err == nil {
			n = f.Name
		}
		flows[id] = n
		return n
	}
	admin := sessionOf(ctx).principal.Role.Can(automation.PermAdmin)
	out := make([]auditRow, 0, len(es))
	for _, e := range es {
		row := auditRow{AuditEntry: e}
		id := e.Resource.ID
		switch e.Resource.Type {
		case "flow":
			if id != "" && !strings.HasPrefix(e.Action, "flow.delete") {
				if row.Name = flowName(id); row.Name != "" {
					row.Href = "/flows/" + url.PathEscape(id)
				}
			}
		case "run":
			if fid := e.Resource.FlowID; fid != "" && id != "" {
				if n := flowName(fid); n != "" {
					row.Name, row.Href = "run of "+n, "/flows/"+url.PathEscape(fid)+"/runs/"+url.PathEscape(id)
				}
			}
		case "connection":
			if id == "" || e.Action == "connection.delete" {
				break
			}
			n, ok := conns[id]
			if !ok {
				if c, err := d.svc.Connection(ctx, p, id); err == nil {
					n = c.Name
				}
				conns[id] = n
			}
			if n != "" {
				row.Name, row.Href = n, "/connections"
			}
		case "variable":
			row.Href = "/variables"
		case "subscription":
			row.Href = "/subscriptions"
		case "key", "session":
			if admin && id != "" {
				row.Href = "/keys"
			}
		}
		out = append(out, row)
	}
	return out
}

// sortedKeys is for the actor list: newest first.
func sortedKeys(ks []automation.APIKey) []automation.APIKey {
	out := slices.Clone(ks)
	slices.Reverse(out)
	return out
}
