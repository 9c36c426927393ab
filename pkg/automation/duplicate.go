package automation

import (
	"bytes"
	"crypto/sha256"
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

// sameDelivery reports whether td carries the body of the delivery first
// was made from, by digest: the bytes as received (RawBody, else Body,
// compacted so that a store that reformats JSON does not matter), the
// bytes of a body kept as base64, and the files.
func sameDelivery(first, td TriggerData) bool {
	return deliveryDigest(first) == deliveryDigest(td)
}

func deliveryDigest(td TriggerData) [sha256.Size]byte {
	h := sha256.New()
	if td.RawBody != "" {
		h.Write([]byte(td.RawBody))
	} else {
		var b bytes.Buffer
		if json.Compact(&b, td.Body) == nil {
			h.Write(b.Bytes())
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
