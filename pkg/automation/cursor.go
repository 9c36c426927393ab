package automation

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// cursors seal store positions into opaque, tamper-evident page cursors. A
// cursor is bound to the project and the list it came from (a flow's runs, a
// status filter), so a forged cursor or one from another project or list is
// refused rather than followed.
type cursors struct{ key []byte }

// seal returns the cursor for position pos in the list named scope.
func (c cursors) seal(scope, pos string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(pos))
	return payload + "." + base64.RawURLEncoding.EncodeToString(c.mac(scope, payload))
}

// open returns the position in a cursor made by seal for the same scope.
func (c cursors) open(scope, cursor string) (string, error) {
	payload, sig, ok := strings.Cut(cursor, ".")
	bad := InvalidCode("INVALID_CURSOR", "cursor is not valid for this list: pass the cursor of the previous page unchanged")
	if !ok {
		return "", bad
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, c.mac(scope, payload)) {
		return "", bad
	}
	pos, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(pos) == 0 {
		return "", bad
	}
	return string(pos), nil
}

func (c cursors) mac(scope, payload string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)
}
