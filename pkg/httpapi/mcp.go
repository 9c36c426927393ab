package httpapi

import (
	"fmt"
	"io"
	"mime"
	"net/http"

	"flowservice/pkg/automation"
)

// MCP serves the Model Context Protocol at /mcp (pkg/mcpserver) for a
// principal the API authenticated. It is given to NewAPI rather than built
// here so that only the functions that serve the management API link the
// MCP SDK.
type MCP interface {
	// ServeMCP answers one request of p; body is r's body, read within
	// MaxBody.
	ServeMCP(w http.ResponseWriter, r *http.Request, body []byte, p automation.Principal)
	MaxBody() int64
}

// WithMCP serves /mcp with m; without it /mcp answers 404 MCP_UNAVAILABLE.
func WithMCP(m MCP) APIOption {
	return func(a *API) { a.mcp = m }
}

// serveMCP is POST /mcp: the key authenticated it and its role may read
// (tools/list); tools/call asks for the operate permission itself. The
// body is read here, within the server's bound, so that a refusal is the
// API's JSON error rather than the SDK's text.
func (a *API) serveMCP(w http.ResponseWriter, r *http.Request) {
	if a.mcp == nil {
		writeError(w, r, http.StatusNotFound, "MCP_UNAVAILABLE", "the MCP server is not available on this deployment")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, r, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE",
			"send MCP messages as Content-Type: application/json (the Streamable HTTP transport)")
		return
	}
	limit := a.mcp.MaxBody()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		writeError(w, r, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE",
			fmt.Sprintf("an MCP request body is at most %d bytes", limit))
		return
	}
	info := infoOf(r.Context())
	a.mcp.ServeMCP(w, r, body, automation.Principal{Project: info.project, KeyID: info.keyID, Role: info.role})
}
