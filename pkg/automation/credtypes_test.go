package automation

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTypedValues(t *testing.T) {
	for _, tt := range []struct {
		typ        ConnectionType
		value      string
		wantHeader string // header name and value the step sends, "" for a query
		wantQuery  string
		wantMasks  int
	}{
		{ConnectionBasic, `{"username": "stripe_sk_1", "password": "pw"}`, "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("stripe_sk_1:pw")), "", 2},
		{ConnectionBasic, `{"username": "bob", "password": "pw"}`, "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("bob:pw")), "", 1},
		{ConnectionHeader, `{"name": "X-Api-Key", "value": "v1"}`, "X-Api-Key: v1", "", 0},
		{ConnectionQuery, `{"name": "api_key", "value": "v2"}`, "", "api_key=v2", 0},
	} {
		raw, err := decodeTypedValue(tt.typ, json.RawMessage(tt.value))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.typ, tt.value, err)
		}
		v, err := typedCredential(tt.typ, raw)
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantQuery != "" {
			if v.Query+"="+v.APIKey.Reveal() != tt.wantQuery {
				t.Errorf("%s: query %s=%s, want %s", tt.typ, v.Query, v.APIKey.Reveal(), tt.wantQuery)
			}
		} else if got := v.Header + ": " + *v.Prefix + v.APIKey.Reveal(); got != tt.wantHeader {
			t.Errorf("%s: sends %q, want %q", tt.typ, got, tt.wantHeader)
		}
		if len(v.Masks) != tt.wantMasks {
			t.Errorf("%s %s: %d further masks, want %d", tt.typ, tt.value, len(v.Masks), tt.wantMasks)
		}
	}
	for _, tt := range []struct {
		typ          ConnectionType
		value, field string
	}{
		{ConnectionBasic, `{"password": "p"}`, "value.username"},
		{ConnectionBasic, `{"username": "a:b", "password": "p"}`, "value.username"},
		{ConnectionBasic, `{"username": "u", "password": 1}`, "value.password"},
		{ConnectionHeader, `{"name": "X-T"}`, "value.value"},
		{ConnectionHeader, `{"name": "X T", "value": "v"}`, "value.name"},
		{ConnectionQuery, `{"name": "", "value": "v"}`, "value.name"},
		{ConnectionQuery, `{"name": "k", "value": "v", "header": "h"}`, "value.header"},
		{ConnectionQuery, `[1]`, "must be an object"},
		{ConnectionQuery, ``, "value is required"},
	} {
		_, err := decodeTypedValue(tt.typ, json.RawMessage(tt.value))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || !strings.Contains(e.Message, tt.field) {
			t.Errorf("%s %s: err = %v, want a 400 naming %s", tt.typ, tt.value, err, tt.field)
		}
	}
}

// TestMCPValue: an MCP value keeps its URL and headers (names
// canonical), masks every header value and a bearer token alone, and a
// bad value is refused naming the field, never a value.
func TestMCPValue(t *testing.T) {
	raw, host, err := decodeMCPValue(json.RawMessage(`{"url": "https://MCP.example.com/mcp", "headers": {"authorization": "Bearer tok-123456789", "x-team": "ops"}}`))
	if err != nil || host != "mcp.example.com" {
		t.Fatalf("host %q: %v", host, err)
	}
	v, err := mcpCredential(raw)
	if err != nil {
		t.Fatal(err)
	}
	if v.MCP.URL != "https://MCP.example.com/mcp" || v.MCP.Headers["Authorization"].Reveal() != "Bearer tok-123456789" || v.MCP.Headers["X-Team"].Reveal() != "ops" {
		t.Errorf("value %+v", v.MCP)
	}
	masks := map[string]bool{}
	for _, m := range v.Masks {
		masks[m.Reveal()] = true
	}
	if !masks["Bearer tok-123456789"] || !masks["tok-123456789"] || !masks["ops"] {
		t.Errorf("masks %v", masks)
	}
	for _, bad := range []struct{ value, want string }{
		{`{"url": "https://u:p@mcp.example.com/"}`, "without credentials"},
		{`{"url": "https://mcp.example.com/", "headers": {"a b": "x"}}`, "not a valid HTTP header name"},
		{`{"url": "https://mcp.example.com/", "headers": {"X-Key": "secret-one", "x-key": "secret-two"}}`, "given twice"},
		{`{"url": "https://mcp.example.com/", "headers": {"Content-Type": "text/plain"}}`, "sets this header itself"},
		{`{"url": "https://mcp.example.com/", "extra": 1}`, "value must be an object"},
		{`{"url": "http://[::1%25eth0]/"}`, "IPv6 zone"},
	} {
		_, _, err := decodeMCPValue(json.RawMessage(bad.value))
		if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "secret-") {
			t.Errorf("%s: %v, want %q", bad.value, err, bad.want)
		}
	}
}
