package dashboard

import (
	"net/http"
	"strings"
)

// RootRedirect sends a browser that opens the bare address ("/") to the
// dashboard, and passes every other request, including a GET / from a
// script or curl, to next (the management API, which answers a JSON 404).
// A browser is a request whose Accept names text/html. prefix is the public
// path in front of "/" (an API Gateway stage), nil for none.
func RootRedirect(next http.Handler, prefix func(*http.Request) string) http.Handler {
	if prefix == nil {
		prefix = func(*http.Request) string { return "" }
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, prefix(r)+"/ui/", http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}
