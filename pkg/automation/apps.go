package automation

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"flowservice/pkg/flowdef"
)

// The app catalog (docs/apps.md): ready actions over the APIs people use
// most, each an HTTP request template over its input. The catalog is data
// the binary ships (pkg/apps); the domain sees it through the AppCatalog
// port, so that validation, connections and the executor read the same
// one.

// App is one app of the catalog: how to connect to it and its actions.
type App struct {
	Key         string        `json:"key"`
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Docs        string        `json:"docs,omitempty"`
	Connection  AppConnection `json:"connection"`
	Actions     []Action      `json:"actions"`
}

// AppConnection says what connection an app's actions use: its type, the
// OAuth2 endpoints and scopes of an OAUTH2 app (an operator registers an
// OAuth app by the app's key and gets these as defaults), how an API key
// is sent, and the hosts the credential is fenced to by default.
type AppConnection struct {
	Type   ConnectionType `json:"type"`
	OAuth2 *AppOAuth2     `json:"oauth2,omitempty"`
	Header string         `json:"header,omitempty"` // API_KEY: the header carrying the key
	Prefix *string        `json:"prefix,omitempty"` // API_KEY: before the key ("Bearer ")
	// KeyIn "path": the API takes the key in the URL's path (Telegram's
	// /bot<token>/), where the request's URL says {key}; no header.
	KeyIn        string   `json:"keyIn,omitempty"`
	AllowedHosts []string `json:"allowedHosts"`
	Help         string   `json:"help,omitempty"` // where the user finds the key
}

// AppOAuth2 is an OAuth2 provider's endpoints and the scopes the app's
// actions need.
type AppOAuth2 struct {
	AuthorizeURL string   `json:"authorizeUrl"`
	TokenURL     string   `json:"tokenUrl"`
	Scopes       []string `json:"scopes"`
}

// Action is one ready action: the input it takes (a JSON Schema, from
// which the dashboard renders its form), the HTTP request it sends (every
// string a template over `input`), and its output (an expression over
// `response`, the HTTP step's output; none: the response's body).
type Action struct {
	Key         string          `json:"key"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Input       json.RawMessage `json:"input"`
	Request     ActionRequest   `json:"request"`
	Output      string          `json:"output,omitempty"`
	// FailWhen, an expression over response, fails the step when true:
	// for APIs that answer 200 to a refusal (Slack's {"ok": false}).
	FailWhen string `json:"failWhen,omitempty"`
}

// ActionRequest is an action's HTTP request template. URL is absolute: a
// connection's baseUrl replaces its origin.
type ActionRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Query   map[string]string `json:"query,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
	// Form is a body sent as application/x-www-form-urlencoded (Stripe),
	// instead of Body.
	Form     map[string]string `json:"form,omitempty"`
	Paginate *Paginate         `json:"paginate,omitempty"`
}

// AppCatalog is the app catalog (pkg/apps). nil in Config: no apps, and
// ACTION steps are refused at save.
type AppCatalog interface {
	// Apps lists the apps, ordered by key.
	Apps() []App
	// App returns one app by key.
	App(key string) (App, bool)
	// Action returns one action by key ("slack.post_message") with its
	// parsed input schema.
	Action(key string) (Action, *flowdef.JSONSchema, bool)
}

// ListApps returns the catalog.
func (s *ConnectionService) ListApps() []App {
	if s.apps == nil {
		return []App{}
	}
	return s.apps.Apps()
}

// checkAction checks an ACTION step against the catalog: the action
// exists, and its input fits the action's schema (templates pass; the
// executor checks their rendered values).
func (s *flowValidator) checkAction(st *Step, at string) error {
	if s.apps == nil {
		return Invalid("%s.action %q: this installation has no app catalog", at, ClipID(st.Action))
	}
	_, schema, ok := s.apps.Action(st.Action)
	if !ok {
		return Invalid("%s.action %q: no such action in the app catalog (GET /api/v1/apps lists them)", at, ClipID(st.Action))
	}
	return flowdef.ValidateActionInput(schema, st, at)
}

// MaxBaseURL bounds a connection's baseUrl.
const MaxBaseURL = 500

// parseBaseURL checks a connection's baseUrl: an absolute http(s) URL
// without user info, query or fragment, whose host is one a step may send
// to. It returns the URL without a trailing slash.
func parseBaseURL(raw string) (string, string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "", Invalid("baseUrl %q: use an absolute http or https URL, such as https://github.example.com/api/v3", ClipID(raw))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", Invalid("baseUrl %q: an origin and an optional path, without user info, query or fragment", ClipID(raw))
	}
	if len(raw) > MaxBaseURL {
		return "", "", Invalid("baseUrl is longer than %d characters", MaxBaseURL)
	}
	if err := CheckSendHost(u.Hostname()); err != nil {
		return "", "", Invalid("baseUrl: %s", err.(*Error).Message)
	}
	return strings.TrimRight(u.String(), "/"), strings.ToLower(u.Hostname()), nil
}

// appHosts gives a new connection of app its fence: the hosts asked for,
// else the catalog app's defaults, but for a model connection (OPENAI,
// ANTHROPIC) or an MCP server, which is not the catalog's app of that
// name and sends to its own URL (an OpenAI-compatible server anywhere, the
// app's MCP server on its own host); a baseUrl's (or MCP url's) host joins them (a fence of nothing stays none: the credential
// goes anywhere, baseUrl included).
func appHosts(apps AppCatalog, app string, typ ConnectionType, asked []string, baseHost string) []string {
	hosts := asked
	if len(hosts) == 0 && apps != nil {
		if a, ok := apps.App(app); ok && typ != ConnectionOpenAI && typ != ConnectionAnthropic && typ != ConnectionMCP {
			hosts = slices.Clone(a.Connection.AllowedHosts)
		}
	}
	if baseHost != "" && len(hosts) > 0 && !HostAllowed(hosts, baseHost) {
		hosts = append(hosts, baseHost)
	}
	return hosts
}

// catalogApp returns the catalog's app of that key, if any.
func (s *ConnectionService) catalogApp(key string) (App, bool) {
	if s.apps == nil {
		return App{}, false
	}
	return s.apps.App(key)
}

// The step types of apps, databases and mail, by their domain names.
const (
	StepAction = flowdef.StepAction
	StepSQL    = flowdef.StepSQL
	StepEmail  = flowdef.StepEmail
)
