package dashboard

import (
	"errors"
	"net/http"
	"net/url"

	"flowservice/pkg/automation"
)

// people.go: the set-up page of invitations, the People page (admins),
// a person's own API keys and the project switcher (docs/access.md).

func (d *Dashboard) peopleRoutes() {
	d.mux.HandleFunc("GET /ui/setup", d.setupPage) // authenticated by its token
	d.mux.HandleFunc("POST /ui/setup", d.setup)
	d.mux.Handle("GET /ui/users", d.auth(d.usersPage))
	d.mux.Handle("POST /ui/users", d.auth(d.inviteUser))
	d.mux.Handle("POST /ui/users/{userId}/role", d.auth(d.setUserRole))
	d.mux.Handle("POST /ui/users/{userId}/remove", d.auth(d.removeUser))
	d.mux.Handle("GET /ui/account/keys", d.auth(d.myKeysPage))
	d.mux.Handle("POST /ui/account/keys", d.auth(d.createMyKey))
	d.mux.Handle("POST /ui/account/keys/{keyId}/revoke", d.auth(d.revokeMyKey))
	d.mux.Handle("POST /ui/switch", d.auth(d.switchProject))
}

// setupData is what the set-up page shows.
type setupData struct {
	Token string
	Link  automation.SetupLink
}

// setupPage shows the form that sets a password through a set-up link. The
// form's CSRF token is the signed-in form's: a nonce cookie and its MAC.
func (d *Dashboard) setupPage(w http.ResponseWriter, r *http.Request) {
	d.renderSetup(w, r, http.StatusOK, r.URL.Query().Get("token"), "")
}

func (d *Dashboard) renderSetup(w http.ResponseWriter, r *http.Request, status int, token, msg string) {
	link, err := d.svc.SetupLinkInfo(r.Context(), token)
	if err != nil {
		st, m := d.problem(r, err)
		d.render(w, r, st, "error", view{Title: "Set-up link", Error: m})
		return
	}
	nonce := newRequestID() + newRequestID()
	d.setCookie(w, r, signinCookie, nonce, 3600e9)
	d.render(w, r, status, "setup", view{Title: "Set up your account", CSRF: d.csrfFor("signin", nonce), Error: msg,
		Data: setupData{Token: token, Link: link}})
}

// setup uses the link once and signs the person in.
func (d *Dashboard) setup(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		d.render(w, r, http.StatusBadRequest, "error", view{Title: "Set-up link", Error: "The form could not be read."})
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !validCSRF(r, d.csrfFor("signin", c.Value)) {
		d.render(w, r, http.StatusForbidden, "error", view{Title: "Forbidden",
			Error: "This form has expired or did not come from the dashboard. Reload the page and try again."})
		return
	}
	token, pw := r.PostFormValue("token"), r.PostFormValue("password")
	if pw != r.PostFormValue("confirm") {
		d.renderSetup(w, r, http.StatusBadRequest, token, "The two passwords differ.")
		return
	}
	u, err := d.svc.AcceptInvitation(r.Context(), token, pw)
	if errors.Is(err, automation.ErrInvalid) && !automation.HasCode(err, "SETUP_LINK_INVALID") {
		_, msg := d.problem(r, err)
		d.renderSetup(w, r, http.StatusBadRequest, token, msg)
		return
	} else if err != nil {
		st, msg := d.problem(r, err)
		d.render(w, r, st, "error", view{Title: "Set-up link", Error: msg})
		return
	}
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	session, _, err := d.svc.StartSession(r.Context(), u.ID, id, d.sourceIP(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.setCookie(w, r, sessionCookie, session, automation.UserSessionTTL)
	d.clearCookie(w, r, signinCookie)
	d.redirect(w, r, "/ui/flows")
}

// usersData is the People page.
type usersData struct {
	Users    []automation.Member
	Roles    []automation.Role
	SetupURL string // the link of the invitation just made, shown once
}

func (d *Dashboard) usersPage(w http.ResponseWriter, r *http.Request) {
	d.renderUsers(w, r, http.StatusOK, "", "", "")
}

func (d *Dashboard) renderUsers(w http.ResponseWriter, r *http.Request, status int, notice, msg, setupURL string) {
	s := sessionOf(r.Context())
	us, err := d.svc.Users(r.Context(), s.project.ID)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, status, "users", view{Title: "People", Nav: "users", Notice: notice, Error: msg,
		Data: usersData{Users: us, Roles: automation.Roles, SetupURL: setupURL}})
}

func (d *Dashboard) inviteUser(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	inv, err := d.svc.InviteUser(r.Context(), s.project.ID, r.PostFormValue("email"), automation.Role(r.PostFormValue("role")))
	if err != nil {
		st, msg := d.problem(r, err)
		d.renderUsers(w, r, st, "", msg, "")
		return
	}
	scheme := "http"
	if d.https(r) {
		scheme = "https"
	}
	link := scheme + "://" + r.Host + d.base(r) + "/setup?token=" + url.QueryEscape(inv.SetupToken)
	d.renderUsers(w, r, http.StatusOK, inv.Member.Email+" is invited. Send them this set-up link (shown once, valid 7 days):", "", link)
}

func (d *Dashboard) setUserRole(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	if _, err := d.svc.SetUserRole(r.Context(), s.project.ID, r.PathValue("userId"), automation.Role(r.PostFormValue("role"))); err != nil {
		st, msg := d.problem(r, err)
		d.renderUsers(w, r, st, "", msg, "")
		return
	}
	d.redirect(w, r, "/ui/users")
}

func (d *Dashboard) removeUser(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	if err := d.svc.RemoveUser(r.Context(), s.project.ID, r.PathValue("userId")); err != nil {
		st, msg := d.problem(r, err)
		d.renderUsers(w, r, st, "", msg, "")
		return
	}
	d.redirect(w, r, "/ui/users")
}

// myKeysData is a person's API keys page.
type myKeysData struct {
	Keys   []automation.APIKey
	Roles  []automation.Role // at most the person's own
	NewKey string            // the key just made, shown once
}

func (d *Dashboard) myKeysPage(w http.ResponseWriter, r *http.Request) {
	d.renderMyKeys(w, r, http.StatusOK, "", "", "")
}

func (d *Dashboard) renderMyKeys(w http.ResponseWriter, r *http.Request, status int, notice, msg, newKey string) {
	s := sessionOf(r.Context())
	ks, err := d.svc.PersonalKeys(r.Context(), s.principal)
	if err != nil {
		st, m := d.problem(r, err)
		d.render(w, r, st, "error", view{Title: "My API keys", Error: m})
		return
	}
	var roles []automation.Role
	for i, role := range automation.Roles {
		if i >= roleIndex(s.principal.Role) {
			roles = append(roles, role)
		}
	}
	d.render(w, r, status, "mykeys", view{Title: "My API keys", Nav: "mykeys", Notice: notice, Error: msg,
		Data: myKeysData{Keys: ks, Roles: roles, NewKey: newKey}})
}

func roleIndex(r automation.Role) int {
	for i, x := range automation.Roles {
		if x == r {
			return i
		}
	}
	return len(automation.Roles)
}

func (d *Dashboard) createMyKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	key, _, err := d.svc.CreatePersonalKey(r.Context(), s.principal, automation.Role(r.PostFormValue("role")))
	if err != nil {
		st, msg := d.problem(r, err)
		d.renderMyKeys(w, r, st, "", msg, "")
		return
	}
	d.renderMyKeys(w, r, http.StatusOK, "Your new key, shown once:", "", key)
}

func (d *Dashboard) revokeMyKey(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	if err := d.svc.RevokePersonalKey(r.Context(), s.principal, r.PathValue("keyId")); err != nil {
		st, msg := d.problem(r, err)
		d.renderMyKeys(w, r, st, "", msg, "")
		return
	}
	d.redirect(w, r, "/ui/account/keys")
}

// switchProject makes another of the person's projects the current one.
// The cookie only names it: every request checks the membership.
func (d *Dashboard) switchProject(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	want := r.PostFormValue("project")
	for _, p := range s.projects {
		if p.Project.ID == want {
			d.setCookie(w, r, projectCookie, want, automation.UserSessionTTL)
			d.redirect(w, r, "/ui/flows")
			return
		}
	}
	d.fail(w, r, automation.NotFound("project", want))
}
