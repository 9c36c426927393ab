package automation

import "encoding/json"

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
