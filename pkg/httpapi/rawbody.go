package httpapi

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"unicode/utf8"

	"flowservice/pkg/automation"
)

// keepsRawBody reports whether a delivery's body must be kept as received
// beside its parsed form: stored JSON is re-encoded, and a signature (a
// VERIFY_SIGNATURE step, or a check a CODE step or an expression makes
// over trigger.rawBody) is over the bytes that were sent. Other runs do not
// pay for a second copy.
func keepsRawBody(f automation.Flow) bool {
	return hasVerifyStep(f) || mentionsRawBody(f.Steps) || mentionsRawBody(f.OnError)
}

// mentionsRawBody looks for "rawBody" in the fields of steps that hold code,
// expressions or templates, at any depth.
func mentionsRawBody(steps []automation.Step) bool {
	const name = "rawBody"
	for _, s := range steps {
		if strings.Contains(s.Code, name) || strings.Contains(s.When, name) || strings.Contains(s.Condition, name) ||
			strings.Contains(s.URL, name) || bytes.Contains(s.Body, []byte(name)) || bytes.Contains(s.Values, []byte(name)) ||
			bytes.Contains(s.Items, []byte(name)) || bytes.Contains(s.Set, []byte(name)) {
			return true
		}
		for _, v := range s.Headers {
			if strings.Contains(v, name) {
				return true
			}
		}
		for _, c := range s.Cases {
			if strings.Contains(c.When, name) || mentionsRawBody(c.Steps) {
				return true
			}
		}
		if mentionsRawBody(s.Default) || mentionsRawBody(s.Steps) {
			return true
		}
	}
	return false
}

// hookTrigger is a parsed delivery as its run keeps it, on both receivers.
func hookTrigger(r *http.Request, f automation.Flow, hb hookBody, raw []byte, dropHeader string) automation.TriggerData {
	td := triggerData(r, f, hb.body, raw, dropHeader)
	td.Files, td.BodyBase64 = hb.files, hb.base64
	if w := f.Trigger.Webhook; w != nil && (w.IdempotencyHeader != "" || w.IdempotencyKey != "") {
		// A repeat of this delivery is recognised by its wire bytes: what
		// the store gives back of the body is re-encoded.
		td.BodyDigest = automation.BodyDigest(raw)
	}
	if td.RawBody != "" && !utf8.ValidString(td.RawBody) {
		// Bytes that are not text would not survive a JSON string: a
		// signature check reads them from bodyBase64 instead.
		td.RawBody, td.BodyBase64 = "", base64.StdEncoding.EncodeToString(raw)
	}
	return td
}
