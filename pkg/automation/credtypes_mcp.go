package automation

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"flowservice/pkg/flowdef"
)

// StepMCP is the MCP step's type (docs/flows.md, "MCP").
const StepMCP = flowdef.StepMCP

// ConnectionMCP reaches an MCP server over Streamable HTTP (MCP steps and
// AI steps' MCP tools): {"url", "headers"?}. The headers (an API key, a
// bearer token) are the credential: kept like every credential (sealed,
// Secrets Manager), never returned, every value masked in run records;
// the URL's host is a send like an HTTP step's, fenced by allowedHosts and
// dialled behind the SSRF guard.
const ConnectionMCP ConnectionType = "MCP"

func init() {
	ConnectionTypes = append(ConnectionTypes, ConnectionMCP)
}

// Bounds of an MCP connection's value (docs/reliability.md).
const (
	MaxMCPHeaders     = 16
	MaxMCPHeaderValue = 8192
	MaxMCPURL         = 2048
)

// MCPConfig is an MCP connection's value as the engine uses it.
type MCPConfig struct {
	URL     string
	Headers map[string]Secret
}

type storedMCP struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// mcpReserved are headers the transport sets itself: a value stored for
// one would break the protocol, or send the request elsewhere.
var mcpReserved = map[string]bool{
	"Host": true, "Content-Type": true, "Content-Length": true, "Accept": true, "Connection": true,
	"Transfer-Encoding": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true,
}

// decodeMCPValue checks an MCP value and returns what Secrets keeps and
// the URL's host. Messages name the field, never a header's value.
func decodeMCPValue(raw json.RawMessage) ([]byte, string, error) {
	shape := `{"url": string, "headers"?: {"<name>": string}}`
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, "", Invalid("value is required: for MCP send %s", shape)
	}
	var v struct {
		URL     *string           `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		// The decoder's message may quote the input; never echo a credential.
		return nil, "", Invalid("value must be an object %s for MCP (header values are strings)", shape)
	}
	if v.URL == nil || strings.TrimSpace(*v.URL) == "" {
		return nil, "", Invalid(`value.url is required for MCP: the server's Streamable HTTP endpoint, e.g. "https://mcp.example.com/mcp"`)
	}
	if len(*v.URL) > MaxMCPURL {
		return nil, "", Invalid("value.url is longer than %d characters", MaxMCPURL)
	}
	u, err := url.Parse(*v.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, "", Invalid(`value.url %q: use an absolute http or https URL without credentials or fragment, e.g. "https://mcp.example.com/mcp" (a key goes in headers)`, ClipID(*v.URL))
	}
	if err := CheckSendHost(u.Hostname()); err != nil {
		return nil, "", Invalid("value.url: %s", err.(*Error).Message)
	}
	if len(v.Headers) > MaxMCPHeaders {
		return nil, "", Invalid("value.headers has %d headers; at most %d are allowed", len(v.Headers), MaxMCPHeaders)
	}
	headers := make(map[string]string, len(v.Headers))
	for name, val := range v.Headers {
		if !isToken(name) {
			return nil, "", Invalid("value.headers: %q is not a valid HTTP header name", ClipID(name))
		}
		canon := http.CanonicalHeaderKey(name)
		if mcpReserved[canon] {
			return nil, "", Invalid("value.headers.%s: the MCP transport sets this header itself", canon)
		}
		if _, dup := headers[canon]; dup {
			return nil, "", Invalid("value.headers.%s is given twice (header names ignore case)", canon)
		}
		if strings.TrimSpace(val) == "" {
			return nil, "", Invalid("value.headers.%s must be a non-empty string", canon)
		}
		if len(val) > MaxMCPHeaderValue {
			return nil, "", Invalid("value.headers.%s is longer than %d bytes", canon, MaxMCPHeaderValue)
		}
		if hasControl(val) {
			return nil, "", Invalid("value.headers.%s contains a control character (CR, LF or another)", canon)
		}
		headers[canon] = val
	}
	out, err := json.Marshal(storedMCP{URL: *v.URL, Headers: headers})
	return out, strings.ToLower(u.Hostname()), err
}

// mcpCredential turns a stored MCP value into what the engine sends and
// masks: every header value.
func mcpCredential(raw []byte) (ConnectionValue, error) {
	var st storedMCP
	if err := json.Unmarshal(raw, &st); err != nil {
		return ConnectionValue{}, err
	}
	cfg := MCPConfig{URL: st.URL, Headers: make(map[string]Secret, len(st.Headers))}
	cv := ConnectionValue{MCP: &cfg}
	for name, val := range st.Headers {
		cfg.Headers[name] = Secret(val)
		cv.Masks = append(cv.Masks, Secret(val))
		// "Bearer <token>": the token alone may show too (an echo, a log).
		if _, tok, ok := strings.Cut(val, " "); ok && len(tok) >= minMaskedUsername {
			cv.Masks = append(cv.Masks, Secret(tok))
		}
	}
	return cv, nil
}
