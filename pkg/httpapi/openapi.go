package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of the management API,
// written by hand and kept true by the tests, which validate every exchange
// they make against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns a copy of the management API's OpenAPI 3.1
// document, for tools and for the dashboard.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIDocument...) }

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
