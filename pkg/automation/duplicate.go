package automation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// CodeDuplicateDelivery is the code of a delivery whose idempotency key
// names an earlier delivery of another body.
const CodeDuplicateDelivery = "DUPLICATE_DELIVERY"

func duplicateDelivery() error {
	return Conflict(CodeDuplicateDelivery,
		"a delivery with this idempotency key and another body was accepted already; "+
			"send the same body to get its run, or use a new key")
}

// BodyDigest is TriggerData.BodyDigest of a body's wire bytes.
func BodyDigest(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// sameDelivery reports whether td carries the body of the delivery first
// was made from: by the digest of the wire bytes both were received with,
// when both have one. A store gives the first one back re-encoded (Go's
// encoder writes "<" as \u003c), so the stored body itself is no proof of
// the bytes; the digest is. A run stored before receivers kept digests is
// compared by legacyDigest.
func sameDelivery(first, td TriggerData) bool {
	if first.BodyDigest != "" && td.BodyDigest != "" {
		return first.BodyDigest == td.BodyDigest
	}
	return legacyDigest(first) == legacyDigest(td)
}

// legacyDigest digests what a run keeps of its body: RawBody, else Body
// compacted and with <, > and & escaped as a store escapes them (so that
// either form of one body digests alike), the bytes of a body kept as
// base64, and the files.
func legacyDigest(td TriggerData) [sha256.Size]byte {
	h := sha256.New()
	if td.RawBody != "" {
		h.Write([]byte(td.RawBody))
	} else {
		var b bytes.Buffer
		if json.Compact(&b, td.Body) == nil {
			var esc bytes.Buffer
			json.HTMLEscape(&esc, b.Bytes())
			h.Write(esc.Bytes())
		} else {
			h.Write(td.Body)
		}
	}
	h.Write([]byte{0})
	h.Write([]byte(td.BodyBase64))
	for _, f := range td.Files {
		h.Write([]byte{0})
		h.Write([]byte(f.Field + "\x00" + f.Filename + "\x00" + f.Base64))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
