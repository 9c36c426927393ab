package automation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
)

// Credential types beside API_KEY and OAUTH2 (docs/access.md). Each is
// kept like an API key (sealed locally, Secrets Manager on AWS), never
// returned, and masked in run records.
const (
	ConnectionBasic  ConnectionType = "BASIC"  // {"username", "password"}: Authorization: Basic
	ConnectionHeader ConnectionType = "HEADER" // {"name", "value"}: one header
	ConnectionQuery  ConnectionType = "QUERY"  // {"name", "value"}: one query parameter
)

// ConnectionTypes lists the types in the order error messages name them.
var ConnectionTypes = []ConnectionType{ConnectionAPIKey, ConnectionOAuth2, ConnectionBasic, ConnectionHeader, ConnectionQuery,
	ConnectionOpenAI, ConnectionAnthropic} // AI: credtypes_ai.go

// minMaskedUsername is the shortest BASIC username masked in run records:
// some services take a secret key as the username (Stripe), but masking a
// short ordinary name would cut every occurrence of it out of the outputs.
const minMaskedUsername = 6

// typedValue is a BASIC, HEADER or QUERY credential as the client sends it
// and as Secrets keeps it (with its type, so that the stored value says
// what it is).
type typedValue struct {
	Type     ConnectionType `json:"type,omitempty"`
	Username *string        `json:"username,omitempty"`
	Password *string        `json:"password,omitempty"`
	Name     *string        `json:"name,omitempty"`
	Value    *string        `json:"value,omitempty"`
}

// shapes is each type's value shape, for messages.
var shapes = map[ConnectionType]string{
	ConnectionBasic:  `{"username": string, "password": string}`,
	ConnectionHeader: `{"name": string, "value": string}`,
	ConnectionQuery:  `{"name": string, "value": string}`,
}

// decodeTypedValue checks the value of a BASIC, HEADER or QUERY connection
// and returns what Secrets keeps. Messages name the field, never its value.
func decodeTypedValue(typ ConnectionType, raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, Invalid("value is required: for %s send %s", typ, shapes[typ])
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, Invalid("value must be an object %s for %s", shapes[typ], typ)
	}
	want := map[ConnectionType][]string{
		ConnectionBasic: {"username", "password"}, ConnectionHeader: {"name", "value"}, ConnectionQuery: {"name", "value"},
	}[typ]
	for name := range fields {
		if !slices.Contains(want, name) {
			return nil, Invalid("value.%s: not a field of a %s value; send %s", ClipID(name), typ, shapes[typ])
		}
	}
	strs := map[string]string{}
	for _, name := range want {
		f, ok := fields[name]
		var s string
		if !ok || json.Unmarshal(f, &s) != nil {
			return nil, Invalid("value.%s is required and must be a string for %s", name, typ)
		}
		if len(s) > 8192 {
			return nil, Invalid("value.%s is longer than 8192 bytes", name)
		}
		strs[name] = s
	}
	v := typedValue{Type: typ}
	switch typ {
	case ConnectionBasic:
		user, pass := strs["username"], strs["password"]
		if strings.TrimSpace(user) == "" {
			return nil, Invalid("value.username must not be blank")
		}
		if strings.Contains(user, ":") {
			return nil, Invalid("value.username must not contain a colon: Basic authentication separates it from the password with one")
		}
		if hasControl(user) || hasControl(pass) {
			return nil, Invalid("value.username and value.password must not contain control characters")
		}
		v.Username, v.Password = &user, &pass
	case ConnectionHeader, ConnectionQuery:
		name, value := strs["name"], strs["value"]
		if typ == ConnectionHeader && !isToken(name) {
			return nil, Invalid("value.name %q is not a valid HTTP header name", ClipID(name))
		}
		if typ == ConnectionQuery && (strings.TrimSpace(name) == "" || hasControl(name)) {
			return nil, Invalid("value.name must be a non-blank query parameter name without control characters")
		}
		if strings.TrimSpace(value) == "" {
			return nil, Invalid("value.value is required and must be a non-empty string")
		}
		if hasControl(value) {
			return nil, Invalid("value.value contains a control character (CR, LF or another)")
		}
		v.Name, v.Value = &name, &value
	}
	return json.Marshal(v)
}

// typedCredential turns a stored BASIC, HEADER or QUERY value into what
// the HTTP step sends and what it masks.
func typedCredential(typ ConnectionType, raw []byte) (ConnectionValue, error) {
	var v typedValue
	if err := json.Unmarshal(raw, &v); err != nil {
		return ConnectionValue{}, err
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch typ {
	case ConnectionBasic:
		user, pass := str(v.Username), str(v.Password)
		prefix := "Basic "
		cv := ConnectionValue{
			APIKey: Secret(base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))),
			Header: "Authorization", Prefix: &prefix,
		}
		if pass != "" {
			cv.Masks = append(cv.Masks, Secret(pass))
		}
		if len(user) >= minMaskedUsername {
			cv.Masks = append(cv.Masks, Secret(user))
		}
		return cv, nil
	case ConnectionHeader:
		empty := ""
		return ConnectionValue{APIKey: Secret(str(v.Value)), Header: str(v.Name), Prefix: &empty}, nil
	case ConnectionQuery:
		return ConnectionValue{APIKey: Secret(str(v.Value)), Query: str(v.Name)}, nil
	}
	return ConnectionValue{}, Invalid("connection type %s has no typed value", typ)
}
