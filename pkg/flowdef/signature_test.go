package flowdef

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func hmacHex(secret, payload string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// headers builds the lookup callers pass: case-insensitive, repeated values
// joined with ",".
func headers(kv ...string) func(string) string {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return func(name string) string { return strings.Join(h.Values(name), ",") }
}

func TestVerifySignature(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Add(-6*time.Minute).Unix(), 10)
	future := strconv.FormatInt(now.Add(6*time.Minute).Unix(), 10)
	const body = `{"id":"evt_1","type":"charge.succeeded"}`
	const stripeSecret = "whsec_test"
	stripeSig := hmacHex(stripeSecret, ts+"."+body)
	const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackSig := "v0=" + hmacHex(slackSecret, "v0:"+ts+":"+body)

	github := Signature{Preset: PresetGitHub, Secret: "It's a Secret to Everybody"}
	generic := Signature{Header: "X-Signature", Prefix: "sha1=", Secret: "s3cr3t"}
	stripe := Signature{Preset: PresetStripe, Secret: stripeSecret}
	slack := Signature{Preset: PresetSlack, Secret: slackSecret}

	tests := []struct {
		name   string
		sig    Signature
		header func(string) string
		body   string
		ok     bool
	}{
		// GitHub's published example (docs: validating webhook deliveries).
		{"github published example", github,
			headers("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"), "Hello, World!", true},
		{"github header name any case", github,
			headers("x-hub-signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"), "Hello, World!", true},
		{"github upper-case hex", github,
			headers("X-Hub-Signature-256", "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17"), "Hello, World!", true},
		{"github tampered body", github,
			headers("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"), "Hello, World?", false},
		{"github wrong prefix", github,
			headers("X-Hub-Signature-256", "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"), "Hello, World!", false},
		{"github missing header", github, headers(), "Hello, World!", false},
		{"github wrong secret", Signature{Preset: PresetGitHub, Secret: "guess"},
			headers("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"), "Hello, World!", false},
		{"github masked secret", Signature{Preset: PresetGitHub, Secret: SecretMask},
			headers("X-Hub-Signature-256", "sha256="+hmacHex(SecretMask, "Hello, World!")), "Hello, World!", false},
		{"empty secret", Signature{Preset: PresetGitHub},
			headers("X-Hub-Signature-256", "sha256="+hmacHex("", "Hello, World!")), "Hello, World!", false},

		{"generic", generic, headers("X-Signature", "sha1="+hmacHex("s3cr3t", body)), body, true},
		{"generic wrong prefix", generic, headers("X-Signature", "sha256="+hmacHex("s3cr3t", body)), body, false},
		{"generic no prefix given", generic, headers("X-Signature", hmacHex("s3cr3t", body)), body, false},
		{"generic empty prefix", Signature{Header: "X-Sig", Secret: "s3cr3t"}, headers("X-Sig", hmacHex("s3cr3t", body)), body, true},
		{"generic no header configured", Signature{Secret: "s3cr3t"}, headers("X-Sig", hmacHex("s3cr3t", body)), body, false},
		{"generic not hex", generic, headers("X-Signature", "sha1=zz"), body, false},
		{"unknown preset", Signature{Preset: "ACME", Secret: "s3cr3t"}, headers("X-Signature", "sha1="+hmacHex("s3cr3t", body)), body, false},

		{"stripe", stripe, headers("Stripe-Signature", "t="+ts+",v1="+stripeSig), body, true},
		{"stripe split by an adapter", stripe, headers("Stripe-Signature", "t="+ts, "Stripe-Signature", "v1="+stripeSig), body, true},
		{"stripe joined with spaces", stripe, headers("Stripe-Signature", "t="+ts+", v1=deadbeef, v0=abc, v1="+stripeSig), body, true},
		{"stripe replay", stripe, headers("Stripe-Signature", "t="+old+",v1="+hmacHex(stripeSecret, old+"."+body)), body, false},
		{"stripe future", stripe, headers("Stripe-Signature", "t="+future+",v1="+hmacHex(stripeSecret, future+"."+body)), body, false},
		{"stripe timestamp swapped", stripe, headers("Stripe-Signature", "t="+old+",v1="+stripeSig), body, false},
		{"stripe tampered body", stripe, headers("Stripe-Signature", "t="+ts+",v1="+stripeSig), body + " ", false},
		{"stripe no v1", stripe, headers("Stripe-Signature", "t="+ts+",v0="+stripeSig), body, false},
		{"stripe no timestamp", stripe, headers("Stripe-Signature", "v1="+stripeSig), body, false},
		{"stripe missing header", stripe, headers(), body, false},

		{"slack", slack, headers("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", ts), body, true},
		{"slack replay", slack, headers("X-Slack-Signature", "v0="+hmacHex(slackSecret, "v0:"+old+":"+body), "X-Slack-Request-Timestamp", old), body, false},
		{"slack timestamp changed", slack, headers("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", strconv.FormatInt(now.Unix()+1, 10)), body, false},
		{"slack missing timestamp", slack, headers("X-Slack-Signature", slackSig), body, false},
		{"slack wrong prefix", slack, headers("X-Slack-Signature", "v1="+slackSig[3:], "X-Slack-Request-Timestamp", ts), body, false},
		{"slack tampered body", slack, headers("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", ts), `{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.sig, tt.header, []byte(tt.body), now)
			if tt.ok {
				if err != nil {
					t.Fatalf("VerifySignature = %v, want nil", err)
				}
				return
			}
			if err != ErrInvalidSignature {
				t.Fatalf("VerifySignature = %#v, want ErrInvalidSignature", err)
			}
		})
	}
}
