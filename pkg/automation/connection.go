package automation

import "time"

// ConnectionType is the kind of credential a connection holds.
type ConnectionType string

// Connection types. Only API_KEY connections are created through the API;
// OAUTH2 needs the interactive authorization of the dashboard.
const (
	ConnectionAPIKey ConnectionType = "API_KEY"
	ConnectionOAuth2 ConnectionType = "OAUTH2"
)

// ConnectionStatus is the health of a connection's credential: what
// the last use or refresh of it said (docs/api.md, "Connection states").
type ConnectionStatus string

// Connection states.
const (
	ConnectionActive  ConnectionStatus = "ACTIVE"
	ConnectionExpired ConnectionStatus = "EXPIRED"
	ConnectionError   ConnectionStatus = "ERROR"
	ConnectionRevoked ConnectionStatus = "REVOKED"
)

// Connection is a stored credential for an external service. The credential
// itself lives in the Secrets store under ConnectionSecretName(ID) and is
// never part of this struct.
type Connection struct {
	ID      string           `json:"id"`
	Project string           `json:"-"`
	Name    string           `json:"name"`
	App     string           `json:"app"`
	Type    ConnectionType   `json:"type"`
	Status  ConnectionStatus `json:"status"`
	Created time.Time        `json:"created"`
	Updated time.Time        `json:"updated"`
	// AllowedHosts fences the credential: an HTTP step sends it only to
	// these hosts (hosts.go), redirects included; none: any host.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// BaseURL replaces the origin of the app's actions (GitHub
	// Enterprise, a proxy, a test double); its host joins AllowedHosts.
	BaseURL string `json:"baseUrl,omitempty"`
}

// ConnectionValue is the credential of an API_KEY connection.
type ConnectionValue struct {
	APIKey Secret `json:"apiKey"`
	// Header and Prefix say how the HTTP step sends the key; the default is
	// "Authorization" with prefix "Bearer ".
	Header string  `json:"header,omitempty"`
	Prefix *string `json:"prefix,omitempty"`
	// Query, when set, sends APIKey as this query parameter instead of a
	// header (QUERY connections).
	Query string `json:"-"`
	// Masks are further values the HTTP step masks in its output beside
	// APIKey (a BASIC connection's password and username).
	Masks []Secret `json:"-"`
	// Database and SMTP are the value of a POSTGRES or MYSQL connection,
	// and of an SMTP connection (dbconn.go); nil for the others.
	Database *DatabaseConfig `json:"-"`
	SMTP     *SMTPConfig     `json:"-"`
	// BaseURL is where an OPENAI or ANTHROPIC connection's API is
	// (credtypes_ai.go).
	BaseURL string `json:"-"`
	// MCP is an MCP connection's URL and headers (credtypes_mcp.go).
	MCP *MCPConfig `json:"-"`
}
