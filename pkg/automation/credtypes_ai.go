package automation

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
)

// Connection types of AI steps: a model provider's API key and where its
// API is. Kept like every credential (sealed, Secrets Manager), never
// returned, the key masked in run records; allowedHosts fences them as it
// fences an HTTP step's.
const (
	// ConnectionOpenAI reaches any OpenAI-compatible API (OpenAI, Ollama,
	// vLLM, LM Studio, a gateway): {"apiKey", "baseUrl"?}, baseUrl as the
	// OpenAI SDK takes it, with /v1.
	ConnectionOpenAI ConnectionType = "OPENAI"
	// ConnectionAnthropic reaches Anthropic's Messages API: {"apiKey",
	// "baseUrl"?}, baseUrl as the Anthropic SDK takes it, without /v1.
	ConnectionAnthropic ConnectionType = "ANTHROPIC"
)

// Default base URLs of the AI connection types.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// IsModelConnection reports whether connections of type t are what an AI
// step names.
func IsModelConnection(t ConnectionType) bool {
	return t == ConnectionOpenAI || t == ConnectionAnthropic
}

type aiValue struct {
	APIKey  string `json:"apiKey"`
	BaseURL string `json:"baseUrl,omitempty"`
}

// decodeAIValue checks the value of an OPENAI or ANTHROPIC connection and
// returns what Secrets keeps, the base URL filled. Messages never quote
// the key.
func decodeAIValue(typ ConnectionType, raw json.RawMessage) ([]byte, error) {
	shape := `{"apiKey": string, "baseUrl"?: string}`
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, Invalid("value is required: for %s send %s", typ, shape)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, Invalid("value must be an object %s for %s", shape, typ)
	}
	var v aiValue
	for name, f := range fields {
		var s string
		if json.Unmarshal(f, &s) != nil {
			return nil, Invalid("value.%s must be a string", ClipID(name))
		}
		switch name {
		case "apiKey":
			v.APIKey = s
		case "baseUrl":
			v.BaseURL = s
		default:
			return nil, Invalid("value.%s: not a field of a %s value; send %s", ClipID(name), typ, shape)
		}
	}
	// A local server (Ollama, LM Studio) takes any key, but the SDKs send
	// one: a blank key is a mistake.
	if strings.TrimSpace(v.APIKey) == "" {
		return nil, Invalid("value.apiKey is required for %s (a local server that takes none accepts any text)", typ)
	}
	if len(v.APIKey) > 8192 || hasControl(v.APIKey) {
		return nil, Invalid("value.apiKey must be one line of at most 8192 bytes")
	}
	if v.BaseURL != "" {
		u, err := url.Parse(v.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, Invalid("value.baseUrl %q: use an absolute http or https URL without credentials, e.g. %q", ClipID(v.BaseURL), defaultBase(typ))
		}
	}
	return json.Marshal(v)
}

func defaultBase(typ ConnectionType) string {
	if typ == ConnectionAnthropic {
		return DefaultAnthropicBaseURL
	}
	return DefaultOpenAIBaseURL
}

// aiCredential turns a stored OPENAI or ANTHROPIC value into what the AI
// step sends.
func aiCredential(typ ConnectionType, raw []byte) (ConnectionValue, error) {
	var v aiValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return ConnectionValue{}, err
	}
	if v.BaseURL == "" {
		v.BaseURL = defaultBase(typ)
	}
	return ConnectionValue{APIKey: Secret(v.APIKey), BaseURL: v.BaseURL}, nil
}
