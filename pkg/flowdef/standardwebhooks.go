package flowdef

import (
	"crypto/hmac"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// StandardSignature is the "v1,<base64>" value of the webhook-signature
// header: the HMAC-SHA256 of "{id}.{timestamp}.{body}".
func StandardSignature(key []byte, id string, ts time.Time, body []byte) string {
	sum := macKey(key, []byte(id), []byte("."), []byte(strconv.FormatInt(ts.Unix(), 10)), []byte("."), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum)
}

// verifyStandard checks webhook-id, webhook-timestamp and webhook-signature
// (or Svix's svix-* names, which carry the same scheme). The signature
// header holds space-separated "v1,<base64>" entries, several while a
// sender rolls its secret; any may match. An API Gateway adapter that split
// the header on commas is undone by header joining values with ",".
func verifyStandard(secret string, header func(string) string, body []byte, now time.Time) bool {
	key, err := StandardKey(secret)
	if err != nil {
		return false
	}
	id, ts, sigs := header("webhook-id"), header("webhook-timestamp"), header("webhook-signature")
	if id == "" && ts == "" && sigs == "" {
		id, ts, sigs = header("svix-id"), header("svix-timestamp"), header("svix-signature")
	}
	id, ts = strings.TrimSpace(id), strings.TrimSpace(ts)
	if id == "" || sigs == "" || !withinTolerance(ts, now) {
		return false
	}
	want := macKey(key, []byte(id), []byte("."), []byte(ts), []byte("."), body)
	ok := false
	for _, s := range strings.Fields(sigs) {
		version, sig, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		// No early exit: every candidate is compared.
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}
