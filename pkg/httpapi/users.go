package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"flowservice/pkg/automation"
)

// userInvite is the body of POST /api/v1/users.
type userInvite struct {
	Email string          `json:"email"`
	Role  automation.Role `json:"role"`
}

// invitedUser is the answer to an invitation: the member and the one-time
// set-up link, shown this once.
type invitedUser struct {
	ID           string          `json:"id"`
	Email        string          `json:"email"`
	Role         automation.Role `json:"role"`
	Status       string          `json:"status"`
	Created      string          `json:"created"`
	SetupURL     string          `json:"setupUrl"`
	SetupExpires string          `json:"setupExpires"`
}

func (a *API) inviteUser(w http.ResponseWriter, r *http.Request) {
	var in userInvite
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	inv, err := a.svc.InviteUser(r.Context(), projectOf(r).ID, in.Email, in.Role)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	m := inv.Member
	writeJSON(w, http.StatusCreated, invitedUser{ID: m.ID, Email: m.Email, Role: m.Role, Status: m.Status,
		Created:      m.Created.UTC().Format(automation.TimeFormat),
		SetupURL:     a.setupURL(r, inv.SetupToken),
		SetupExpires: inv.Expires.UTC().Format(automation.TimeFormat)})
}

// setupURL is the dashboard's set-up page for a token, at the address the
// request came to. The scheme follows X-Forwarded-Proto from anyone: the
// link goes back to the admin who asked, so a forged header only spoils
// their own answer.
func (a *API) setupURL(r *http.Request, token string) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host + a.publicPrefix(r) + "/ui/setup?token=" + url.QueryEscape(token)
}

func (a *API) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := a.svc.Users(r.Context(), projectOf(r).ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, automation.List[automation.Member]{Data: us})
}

func (a *API) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := a.svc.ProjectUser(r.Context(), projectOf(r).ID, r.PathValue("userId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (a *API) removeUser(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.RemoveUser(r.Context(), projectOf(r).ID, r.PathValue("userId")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}

func (a *API) setUserRole(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Role automation.Role `json:"role"`
	}
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	u, err := a.svc.SetUserRole(r.Context(), projectOf(r).ID, r.PathValue("userId"), in.Role)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}
