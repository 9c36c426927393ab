package httpapi

import (
	"net/http"
	"strings"
)

// authenticate admits requests with a valid bearer key and puts the key's
// project in the request's info. A missing header, another scheme and an
// unknown key all get the Service's one 401, so a caller learns nothing
// about which keys exist.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.svc.AuthenticatePrincipal(r.Context(), bearerKey(r))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		info := infoOf(r.Context())
		info.project, info.keyID, info.role = p.Project, p.KeyID, p.Role
		next.ServeHTTP(w, r)
	})
}

// bearerKey returns the key of an "Authorization: Bearer <key>" header, or
// "" when there is none; the scheme is case-insensitive (RFC 9110 §11.1).
func bearerKey(r *http.Request) string {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}
