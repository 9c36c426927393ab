package flowdef

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureTolerance is how far a timestamped signature (Stripe, Slack) may
// be from now: older or newer deliveries are refused as replays.
const SignatureTolerance = 5 * time.Minute

// A preset is one signing scheme, both ways: Sign makes the headers a
// sender of that scheme sends, and verify checks them. Keeping the two side
// by side (and a round-trip test over the table) is what keeps the
// dashboard's test events, the alert sender and the receivers agreeing.
type preset struct {
	sign   func(secret string, body []byte, id string, now time.Time) (map[string]string, error)
	verify func(secret string, header func(string) string, body []byte, now time.Time) bool
}

// signingSchemes are the named schemes of Signature.Preset, in upper case.
var signingSchemes = map[string]preset{
	PresetGitHub: {
		sign: func(secret string, body []byte, _ string, _ time.Time) (map[string]string, error) {
			return map[string]string{"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac(secret, body))}, nil
		},
		verify: func(secret string, header func(string) string, body []byte, _ time.Time) bool {
			return verifyPrefixed(secret, header("X-Hub-Signature-256"), "sha256=", body)
		},
	},
	PresetStripe: {
		sign: func(secret string, body []byte, _ string, now time.Time) (map[string]string, error) {
			ts := strconv.FormatInt(now.Unix(), 10)
			return map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" +
				hex.EncodeToString(mac(secret, []byte(ts), []byte("."), body))}, nil
		},
		verify: func(secret string, header func(string) string, body []byte, now time.Time) bool {
			return verifyStripe(secret, header("Stripe-Signature"), body, now)
		},
	},
	PresetSlack: {
		sign: func(secret string, body []byte, _ string, now time.Time) (map[string]string, error) {
			ts := strconv.FormatInt(now.Unix(), 10)
			return map[string]string{"X-Slack-Request-Timestamp": ts,
				"X-Slack-Signature": "v0=" + hex.EncodeToString(mac(secret, []byte("v0:"+ts+":"), body))}, nil
		},
		verify: func(secret string, header func(string) string, body []byte, now time.Time) bool {
			return verifySlack(secret, header("X-Slack-Signature"), header("X-Slack-Request-Timestamp"), body, now)
		},
	},
	PresetStandard: {
		sign: func(secret string, body []byte, id string, now time.Time) (map[string]string, error) {
			key, err := StandardKey(secret)
			if err != nil {
				return nil, err
			}
			return map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(now.Unix(), 10),
				"webhook-signature": StandardSignature(key, id, now, body)}, nil
		},
		verify: verifyStandard,
	},
}

// SignHeaders returns the headers that sign body as a sender of sig's
// scheme would at now (id is the delivery's ID, for the schemes that sign
// one): what the dashboard's test events send. A custom scheme (no preset)
// is its header with its prefix and the hex HMAC of the body.
func SignHeaders(sig Signature, body []byte, id string, now time.Time) (map[string]string, error) {
	secret := sig.Secret.Reveal()
	if secret == "" || sig.Secret.Masked() {
		return nil, errors.New("the signature has no secret")
	}
	if sig.Preset == "" {
		if sig.Header == "" {
			return nil, errors.New("the signature has neither a preset nor a header")
		}
		return map[string]string{sig.Header: sig.Prefix + hex.EncodeToString(mac(secret, body))}, nil
	}
	p, ok := signingSchemes[strings.ToUpper(sig.Preset)]
	if !ok {
		return nil, fmt.Errorf("unknown signature preset %q", sig.Preset)
	}
	return p.sign(secret, body, id, now)
}

// VerifySignature checks an HMAC-SHA256 signature of the raw body. header
// looks up a request header by name, case-insensitively, with repeated values
// joined by ","; Stripe's value is parsed accordingly, because API Gateway
// adapters split headers on commas. Every failure is the same 401, so that a
// caller learns nothing about which part was wrong.
func VerifySignature(sig Signature, header func(name string) string, body []byte, now time.Time) error {
	secret := sig.Secret.Reveal()
	// An unset or still-masked secret would make the HMAC guessable.
	if secret == "" || sig.Secret.Masked() {
		return errInvalidSignature()
	}
	var ok bool
	if sig.Preset == "" {
		ok = sig.Header != "" && verifyPrefixed(secret, header(sig.Header), sig.Prefix, body)
	} else if p, found := signingSchemes[strings.ToUpper(sig.Preset)]; found {
		ok = p.verify(secret, header, body, now)
	}
	if !ok {
		return errInvalidSignature()
	}
	return nil
}

// ErrInvalidSignature is every signature failure: one error, so that a
// caller learns nothing about which part was wrong.
var ErrInvalidSignature = errors.New("invalid webhook signature")

func errInvalidSignature() error { return ErrInvalidSignature }

// mac is the HMAC-SHA256 of the parts, concatenated.
func mac(secret string, parts ...[]byte) []byte {
	return macKey([]byte(secret), parts...)
}

// macKey is mac with a binary key (Standard Webhooks keys are base64).
func macKey(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// hexEqual compares a hex digest (either case) with want in constant time.
func hexEqual(digest string, want []byte) bool {
	got, err := hex.DecodeString(strings.TrimSpace(digest))
	return err == nil && hmac.Equal(got, want)
}

func verifyPrefixed(secret, value, prefix string, body []byte) bool {
	value = strings.TrimSpace(value)
	if value == "" || !strings.HasPrefix(value, prefix) {
		return false
	}
	return hexEqual(value[len(prefix):], mac(secret, body))
}

// withinTolerance parses a Unix timestamp and checks it against now.
func withinTolerance(ts string, now time.Time) bool {
	t, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return false
	}
	d := now.Sub(time.Unix(t, 0))
	return d <= SignatureTolerance && d >= -SignatureTolerance
}

// verifyStripe checks "t=<unix>,v1=<hex>[,v1=<hex>...]": the signed payload
// is "<t>.<body>", and any v1 may match (Stripe sends several while a
// secret is rolled).
func verifyStripe(secret, value string, body []byte, now time.Time) bool {
	var ts string
	var sigs []string
	for _, item := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 || !withinTolerance(ts, now) {
		return false
	}
	want := mac(secret, []byte(ts), []byte("."), body)
	ok := false
	for _, s := range sigs {
		// No early exit: every candidate is compared.
		if hexEqual(s, want) {
			ok = true
		}
	}
	return ok
}

// verifySlack checks "v0=<hex>" of "v0:<timestamp>:<body>".
func verifySlack(secret, value, ts string, body []byte, now time.Time) bool {
	value = strings.TrimSpace(value)
	ts = strings.TrimSpace(ts)
	if ts == "" || !strings.HasPrefix(value, "v0=") || !withinTolerance(ts, now) {
		return false
	}
	return hexEqual(value[len("v0="):], mac(secret, []byte("v0:"+ts+":"), body))
}
