package dashboard

import (
	"net/http"
	"net/url"

	"flowservice/pkg/automation"
)

// The project's API keys and their roles (admin only): list, create (the
// key shown once, on the answer to the form, never in a URL), revoke after
// a confirmation page. A key's role cannot be changed: the store keeps
// keys immutable but for their revocation, so a new role is a new key.

func (d *Dashboard) keyRoutes() {
	d.mux.Handle("GET /ui/keys", d.auth(d.keysPage))
	d.mux.Handle("POST /ui/keys", d.auth(d.createKey))
	d.mux.Handle("GET /ui/keys/{keyId}/revoke", d.auth(d.confirmRevokeKey))
	d.mux.Handle("POST /ui/keys/{keyId}/revoke", d.auth(d.revokeKey))
}

// keyActivityScan bounds the audit entries the keys page reads to say when
// each key last acted: the newest 200 (two pages), so the page costs the
// same whatever the log holds. Older activity shows as "—".
const keyActivityScan = 200

// keyRow is one key as the page lists it.
type keyRow struct {
	automation.APIKey
	LastSeen *automation.AuditEntry // its newest entry within keyActivityScan
	Self     bool                   // the key this session signed in with
}

// keysData is the keys page.
type keysData struct {
	Keys    []keyRow
	Roles   []automation.Role
	Role    string // the create form's role
	New     string // the key just made: shown once
	NewID   string
	Scanned int // audit entries read for LastSeen
}

func (d *Dashboard) keysPage(w http.ResponseWriter, r *http.Request) {
	d.renderKeys(w, r, http.StatusOK, notice(r), "", keysData{Role: string(automation.RoleViewer)})
}

func (d *Dashboard) renderKeys(w http.ResponseWriter, r *http.Request, status int, note, errMsg string, data keysData) {
	ctx, p := r.Context(), project(r)
	ks, err := d.svc.ProjectKeys(ctx, p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	seen, scanned, err := d.keyActivity(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	self := sessionOf(ctx).principal.KeyID
	data.Keys, data.Scanned, data.Roles = make([]keyRow, 0, len(ks)), scanned, automation.Roles
	// Newest first, as every other list of the dashboard.
	for i := len(ks) - 1; i >= 0; i-- {
		k := ks[i]
		row := keyRow{APIKey: k, Self: k.ID == self}
		if e, ok := seen[k.ID]; ok {
			row.LastSeen = &e
		}
		data.Keys = append(data.Keys, row)
	}
	d.render(w, r, status, "keys", view{Title: "API keys", Nav: "keys", Notice: note, Error: errMsg, Data: data})
}

// keyActivity reads the newest audit entries (at most keyActivityScan) and
// keeps each key's newest one.
func (d *Dashboard) keyActivity(r *http.Request) (map[string]automation.AuditEntry, int, error) {
	seen := map[string]automation.AuditEntry{}
	cursor, scanned := "", 0
	for scanned < keyActivityScan {
		l, err := d.svc.AuditLog(r.Context(), project(r), automation.AuditSearch{
			PageRequest: automation.PageRequest{Limit: "100", Cursor: cursor}})
		if err != nil {
			return nil, 0, err
		}
		for _, e := range l.Data {
			if _, ok := seen[e.Actor.KeyID]; !ok && e.Actor.KeyID != "" {
				seen[e.Actor.KeyID] = e
			}
		}
		scanned += len(l.Data)
		if l.Cursor == nil {
			break
		}
		cursor = *l.Cursor
	}
	return seen, scanned, nil
}

func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request) {
	role := r.PostFormValue("role")
	secret, k, err := d.svc.CreateProjectKey(r.Context(), project(r), role)
	if err != nil {
		status, msg := d.problem(r, err)
		d.renderKeys(w, r, status, "", msg, keysData{Role: role})
		return
	}
	// Answered here, not redirected: the key must not travel in a URL.
	d.renderKeys(w, r, http.StatusOK, "Key created. Copy it now: it is shown this once and cannot be read again.", "",
		keysData{Role: role, New: secret, NewID: k.ID})
}

func (d *Dashboard) confirmRevokeKey(w http.ResponseWriter, r *http.Request) {
	ks, err := d.svc.ProjectKeys(r.Context(), project(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	id := r.PathValue("keyId")
	for _, k := range ks {
		if k.ID != id || k.Revoked != nil {
			continue
		}
		after := " (" + string(k.Role) + ", " + k.Prefix + "…) stops working at once: every request and dashboard session made with it is refused."
		if k.ID == sessionOf(r.Context()).principal.KeyID {
			after += " It is the key you signed in with: you will be signed out."
		}
		d.render(w, r, http.StatusOK, "confirm_delete", view{Title: "Revoke " + k.ID, Nav: "keys", Data: deletion{
			Crumbs:  []crumb{{"/keys", "API keys"}},
			Heading: "Revoke key " + k.ID + "?",
			Name:    k.ID, ID: k.ID, Before: "The key ", After: after,
			Action: "/keys/" + url.PathEscape(k.ID) + "/revoke", Button: "Revoke key", Cancel: "/keys",
		}})
		return
	}
	d.fail(w, r, automation.NotFound("api key", id))
}

func (d *Dashboard) revokeKey(w http.ResponseWriter, r *http.Request) {
	if err := d.svc.RevokeProjectKey(r.Context(), project(r), r.PathValue("keyId")); err != nil {
		status, msg := d.problem(r, err)
		d.renderKeys(w, r, status, "", msg, keysData{Role: string(automation.RoleViewer)})
		return
	}
	d.redirect(w, r, "/ui/keys?done=keyrevoked")
}
