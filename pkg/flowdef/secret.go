package flowdef

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// SecretMask stands for a write-only value that is set: responses show it in
// place of the value, stored records keep it in place of the value, and a
// client that sends it back unchanged keeps the stored value (the GitHub
// webhook API does the same).
const SecretMask = "********"

// Secret is a write-only string. It marshals as SecretMask when set, so no
// encoder can leak it, and its String form is masked too, so no log line can.
type Secret string

// MarshalJSON writes SecretMask for any non-empty value.
func (s Secret) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte(`""`), nil
	}
	return json.Marshal(SecretMask)
}

// String masks the value for fmt and slog.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return SecretMask
}

// Reveal returns the value itself, for the few places that must use it.
func (s Secret) Reveal() string { return string(s) }

// Masked reports whether s is the stand-in for a stored value.
func (s Secret) Masked() bool { return s == SecretMask }

// MinMaskedSecret is the shortest secret value masked in run records: a
// shorter one would mask unrelated text everywhere (docs/environments.md).
const MinMaskedSecret = 4

// SecretForms are the forms of a secret value that masking replaces: the
// value, its URL-escaped forms (url.QueryEscape, url.PathEscape: a query
// string or a path an echoing service shows back), its base64 forms
// (standard and URL alphabets, padded or not: a Basic header, a token
// built from it), and each as it appears inside a JSON string, HTML's
// characters escaped or not. Longest
// first, so that a form containing another is replaced whole. None for a
// value shorter than MinMaskedSecret.
func SecretForms(v string) []string {
	if len(v) < MinMaskedSecret {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
		base64.RawStdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))} {
		add(f)
		add(jsonEscaped(f, false))
		add(jsonEscaped(f, true)) // as json.Marshal writes it: & < > as \u0026…
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// SecretMasks are the forms (SecretForms) of every value, longest first.
func SecretMasks(values []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		for _, f := range SecretForms(v) {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// MaskText replaces every one of masks (SecretMasks) in s with SecretMask.
func MaskText(s string, masks []string) string {
	for _, m := range masks {
		s = strings.ReplaceAll(s, m, SecretMask)
	}
	return s
}

// MaskJSON replaces masks (SecretMasks) inside the strings, keys included,
// of a JSON document, keeping it valid JSON; a document that cannot be
// read is replaced whole.
func MaskJSON(raw json.RawMessage, masks []string) json.RawMessage {
	if len(masks) == 0 || len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(`{"masked":true}`)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(MaskValue(v, masks)); err != nil {
		return json.RawMessage(`{"masked":true}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// MaskValue is MaskJSON over a decoded JSON value.
func MaskValue(v any, masks []string) any {
	switch t := v.(type) {
	case string:
		return MaskText(t, masks)
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = MaskValue(t[i], masks)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[MaskText(k, masks)] = MaskValue(e, masks)
		}
		return out
	}
	return v
}

// jsonEscaped is s as it appears between the quotes of a JSON string,
// with HTML's characters escaped or not.
func jsonEscaped(s string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(buf.String(), "\n")
	return out[1 : len(out)-1]
}
