package alerts

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"flowservice/pkg/automation"
)

// Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// NewSecret returns a fresh signing secret: "whsec_" and the base64 of 32
// random bytes (Standard Webhooks asks for 24 to 64).
func NewSecret() automation.Secret {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return automation.Secret(automation.StandardSecretPrefix + base64.StdEncoding.EncodeToString(key))
}

// Sign sets the three Standard Webhooks headers of a delivery of an event
// made at ts. The ID is the event's, the same on every retry; the
// timestamp is the attempt's, so that a retry hours later still passes the
// receiver's 5-minute tolerance.
func Sign(h http.Header, secret automation.Secret, eventID string, ts time.Time, body []byte) error {
	key, err := automation.StandardKey(secret.Reveal())
	if err != nil {
		return err
	}
	h.Set(HeaderID, eventID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, automation.StandardSignature(key, eventID, ts, body))
	return nil
}
