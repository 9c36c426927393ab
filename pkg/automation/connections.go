package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// ConnectionInput is the body of a connection create.
type ConnectionInput struct {
	Name  string          `json:"name"`
	App   string          `json:"app"`
	Type  ConnectionType  `json:"type"`
	Value json.RawMessage `json:"value"`
	// AllowedHosts: see Connection.AllowedHosts.
	AllowedHosts []string `json:"allowedHosts"`
	// BaseURL: see Connection.BaseURL.
	BaseURL string `json:"baseUrl"`
}

// ListConnections returns one page of the project's connections.
func (s *ConnectionService) ListConnections(ctx context.Context, p Project, pr PageRequest) (List[Connection], error) {
	if pr.Status != "" {
		return List[Connection]{}, InvalidCode("INVALID_PARAMETER", "connections take no status filter")
	}
	scope := p.ID + "/connections" // a cursor is bound to its project
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return List[Connection]{}, err
	}
	page, err := s.store.ListConnections(ctx, p.ID, q)
	if err != nil {
		return List[Connection]{}, wrap("list connections", err)
	}
	return list(s, scope, q, page, func(c Connection) Connection { return c }), nil
}

// Connection returns one connection of the project, without its credential.
func (s *ConnectionService) Connection(ctx context.Context, p Project, id string) (Connection, error) {
	c, err := s.store.Connection(ctx, p.ID, id)
	return c, wrap("get connection", err)
}

// CreateConnection stores an API key connection: the key goes to Secrets,
// the rest to the store. OAuth2 connections need the dashboard.
func (s *ConnectionService) CreateConnection(ctx context.Context, p Project, in ConnectionInput) (Connection, error) {
	if err := checkText("name", in.Name, 200); err != nil {
		return Connection{}, err
	}
	if err := checkText("app", in.App, 100); err != nil {
		return Connection{}, err
	}
	var raw []byte
	var mcpHost string // an MCP server's host joins the fence as a baseUrl's does
	switch in.Type {
	case ConnectionAPIKey:
		v, err := decodeConnectionValue(in.Value)
		if err != nil {
			return Connection{}, err
		}
		if raw, err = json.Marshal(struct {
			APIKey string  `json:"apiKey"`
			Header string  `json:"header,omitempty"`
			Prefix *string `json:"prefix,omitempty"`
		}{v.APIKey.Reveal(), v.Header, v.Prefix}); err != nil {
			return Connection{}, wrap("create connection", err)
		}
	case ConnectionBasic, ConnectionHeader, ConnectionQuery:
		var err error
		if raw, err = decodeTypedValue(in.Type, in.Value); err != nil {
			return Connection{}, err
		}
	case ConnectionPostgres, ConnectionMySQL:
		var err error
		if raw, err = decodeDatabase(in.Type, in.Value); err != nil {
			return Connection{}, err
		}
	case ConnectionSMTP:
		var err error
		if raw, err = decodeSMTP(in.Value); err != nil {
			return Connection{}, err
		}
	case ConnectionOpenAI, ConnectionAnthropic: // credtypes_ai.go
		var err error
		if raw, err = decodeAIValue(in.Type, in.Value); err != nil {
			return Connection{}, err
		}
	case ConnectionMCP: // credtypes_mcp.go
		var err error
		if raw, mcpHost, err = decodeMCPValue(in.Value); err != nil {
			return Connection{}, err
		}
	case ConnectionOAuth2:
		return Connection{}, Invalid("OAUTH2 connections cannot be created through the API: they need the interactive authorization in the dashboard (Connect on its connections page, {base_url}/ui/connections)")
	case "":
		return Connection{}, Invalid("type is required: allowed values are %s", join(ConnectionTypes))
	default:
		return Connection{}, Invalid("type %q: allowed values are %s", ClipID(string(in.Type)), join(ConnectionTypes))
	}
	hosts, err := ParseAllowedHosts("allowedHosts", in.AllowedHosts)
	if err != nil {
		return Connection{}, err
	}
	var base, baseHost string
	if in.BaseURL != "" {
		if base, baseHost, err = parseBaseURL(in.BaseURL); err != nil {
			return Connection{}, err
		}
	}
	if mcpHost != "" {
		baseHost = mcpHost
	}
	hosts = appHosts(s.apps, in.App, in.Type, hosts, baseHost)
	return s.storeConnection(ctx, p, in.Name, in.App, in.Type, raw, hosts, base)
}

// storeConnection stores a new ACTIVE connection with its credential raw:
// the credential first, so that a stored connection always has one.
func (s *ConnectionService) storeConnection(ctx context.Context, p Project, name, app string, typ ConnectionType, raw []byte, hosts []string, baseURL string) (Connection, error) {
	now := s.clock()
	c := Connection{
		ID: s.newID(PrefixConnection), Project: p.ID, Name: name, App: app,
		Type: typ, Status: ConnectionActive, Created: now, Updated: now, AllowedHosts: hosts,
		BaseURL: baseURL,
	}
	if err := s.secrets.PutSecret(ctx, p.ID, ConnectionSecretName(c.ID), raw); err != nil {
		return Connection{}, wrap("store connection credential", err)
	}
	auditCreated(ctx, c.ID)
	if err := s.store.CreateConnection(ctx, c); err != nil {
		_ = s.secrets.DeleteSecret(ctx, p.ID, ConnectionSecretName(c.ID))
		return Connection{}, wrap("create connection", err)
	}
	return c, nil
}

// DeleteConnection removes a connection and revokes its credential at once:
// flows that use it fail on their next run.
func (s *ConnectionService) DeleteConnection(ctx context.Context, p Project, id string) error {
	if _, err := s.store.Connection(ctx, p.ID, id); err != nil {
		return wrap("delete connection", err)
	}
	// The credential first: once the call returns, nothing can use it.
	if err := s.secrets.DeleteSecret(ctx, p.ID, ConnectionSecretName(id)); err != nil {
		return wrap("revoke connection credential", err)
	}
	return wrap("delete connection", s.store.DeleteConnection(ctx, p.ID, id))
}

// ConnectionCredential returns the stored value of an ACTIVE or ERROR
// connection, for the engine. A deleted, expired or revoked connection is
// an error naming it.
func (s *ConnectionService) ConnectionCredential(ctx context.Context, project, id string) (Connection, ConnectionValue, error) {
	c, err := s.store.Connection(ctx, project, id)
	if errors.Is(err, ErrNotFound) {
		return Connection{}, ConnectionValue{}, &Error{Kind: ErrNotFound, Code: "CONNECTION_NOT_FOUND",
			Message: "connection " + id + " was deleted or does not exist"}
	} else if err != nil {
		return Connection{}, ConnectionValue{}, wrap("get connection", err)
	}
	if c.Status == ConnectionExpired || c.Status == ConnectionRevoked {
		return c, ConnectionValue{}, &Error{Kind: ErrConflict, Code: "CONNECTION_" + string(c.Status),
			Message: "connection " + id + " (" + c.Name + ") is " + string(c.Status) + ": re-authorize it"}
	}
	// An API key never changes under its connection's ID, and the record
	// read above refuses a deleted or revoked one: the key may come from
	// the cache. OAuth2 tokens are refreshed and rotated, and a refusal is
	// judged against the newest stored token: never cached.
	read := s.secrets.Secret
	if c.Type != ConnectionOAuth2 {
		read = func(ctx context.Context, project, name string) ([]byte, error) {
			return cachedSecret(ctx, s.secrets, project, name, connectionStamp(c))
		}
	}
	raw, err := read(ctx, project, ConnectionSecretName(id))
	if errors.Is(err, ErrNotFound) {
		return c, ConnectionValue{}, &Error{Kind: ErrNotFound, Code: "CONNECTION_NOT_FOUND",
			Message: "connection " + id + " has no stored credential: it was deleted"}
	} else if err != nil {
		return c, ConnectionValue{}, wrap("read connection credential", err)
	}
	switch c.Type {
	case ConnectionOAuth2:
		return s.oauthCredential(ctx, c, raw)
	case ConnectionPostgres, ConnectionMySQL, ConnectionSMTP:
		v, err := storedConfig(c.Type, raw)
		if err != nil {
			return c, ConnectionValue{}, wrap("read connection credential", err)
		}
		return c, v, nil
	case ConnectionOpenAI, ConnectionAnthropic:
		v, err := aiCredential(c.Type, raw)
		if err != nil {
			return c, ConnectionValue{}, wrap("read connection credential", err)
		}
		return c, v, nil
	case ConnectionMCP:
		v, err := mcpCredential(raw)
		if err != nil {
			return c, ConnectionValue{}, wrap("read connection credential", err)
		}
		return c, v, nil
	case ConnectionBasic, ConnectionHeader, ConnectionQuery:
		v, err := typedCredential(c.Type, raw)
		if err != nil {
			return c, ConnectionValue{}, wrap("read connection credential", err)
		}
		return c, v, nil
	}
	var v struct {
		APIKey string  `json:"apiKey"`
		Header string  `json:"header"`
		Prefix *string `json:"prefix"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return c, ConnectionValue{}, wrap("read connection credential", err)
	}
	return c, ConnectionValue{APIKey: Secret(v.APIKey), Header: v.Header, Prefix: v.Prefix}, nil
}

// SetConnectionStatus records a state change seen by the engine.
func (s *ConnectionService) SetConnectionStatus(ctx context.Context, project, id string, st ConnectionStatus) error {
	return wrap("set connection status", s.store.SetConnectionStatus(ctx, project, id, st, s.clock()))
}

func decodeConnectionValue(raw json.RawMessage) (ConnectionValue, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return ConnectionValue{}, Invalid(`value is required: for API_KEY send {"apiKey": "<the service's key>"}`)
	}
	var v struct {
		APIKey *string `json:"apiKey"`
		Header string  `json:"header"`
		Prefix *string `json:"prefix"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		// The decoder's message may quote the input; never echo a credential.
		return ConnectionValue{}, Invalid(`value must be an object {"apiKey": string, "header"?: string, "prefix"?: string}`)
	}
	if v.APIKey == nil || strings.TrimSpace(*v.APIKey) == "" {
		return ConnectionValue{}, Invalid("value.apiKey is required and must be a non-empty string")
	}
	if len(*v.APIKey) > 8192 {
		return ConnectionValue{}, Invalid("value.apiKey is longer than 8192 bytes")
	}
	if v.Header != "" && !isToken(v.Header) {
		return ConnectionValue{}, Invalid("value.header %q is not a valid HTTP header name", v.Header)
	}
	// The key and the prefix are sent in a header: CR or LF would split it.
	if hasControl(*v.APIKey) {
		return ConnectionValue{}, Invalid("value.apiKey contains a control character (CR, LF or another)")
	}
	if v.Prefix != nil && hasControl(*v.Prefix) {
		return ConnectionValue{}, Invalid("value.prefix contains a control character (CR, LF or another): it is sent in a header")
	}
	return ConnectionValue{APIKey: Secret(*v.APIKey), Header: v.Header, Prefix: v.Prefix}, nil
}

// ConnectionIDsByName maps each connection name of the project to the IDs
// that carry it (names are not unique), for HTTP steps that name their
// connection: read once when a run starts.
func (s *ConnectionService) ConnectionIDsByName(ctx context.Context, project string) (map[string][]string, error) {
	out := map[string][]string{}
	q := ListQuery{Limit: MaxPageSize}
	for {
		page, err := s.store.ListConnections(ctx, project, q)
		if err != nil {
			return nil, wrap("list connections", err)
		}
		for _, c := range page.Items {
			out[c.Name] = append(out[c.Name], c.ID)
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}
