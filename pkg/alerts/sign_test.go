package alerts_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

// TestSignVerifiedByOfficialLibrary signs deliveries as the sender does and
// has the official Standard Webhooks Go library verify them.
func TestSignVerifiedByOfficialLibrary(t *testing.T) {
	secret := alerts.NewSecret()
	if !strings.HasPrefix(secret.Reveal(), "whsec_") {
		t.Fatalf("secret %q lacks the whsec_ prefix", secret.Reveal())
	}
	wh, err := standardwebhooks.NewWebhook(secret.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"run.failed","timestamp":"2026-11-26T09:00:00Z","data":{"id":"run_1"}}`)
	h := http.Header{}
	if err := alerts.Sign(h, secret, "msg_abc", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("official library refused our signature: %v (headers %v)", err, h)
	}
	// And it refuses a changed body: the check above can fail.
	if err := wh.Verify(append(body, ' '), h); err == nil {
		t.Fatal("official library accepted a changed body")
	}
	other, _ := standardwebhooks.NewWebhook(alerts.NewSecret().Reveal())
	if err := other.Verify(body, h); err == nil {
		t.Fatal("official library accepted the signature under another secret")
	}
	// The official signer and ours agree byte for byte.
	ts := time.Unix(1_700_000_000, 0)
	want, _ := wh.Sign("msg_abc", ts, body)
	if err := alerts.Sign(h, secret, "msg_abc", ts, body); err != nil {
		t.Fatal(err)
	}
	if got := h.Get(alerts.HeaderSignature); got != want {
		t.Fatalf("signature = %q, official library's = %q", got, want)
	}
}

// TestStandardPresetVerifiesOfficialSigner has the official library sign
// and the inbound STANDARD preset verify: several space-separated
// signatures, the 5-minute tolerance, whsec_ secrets, Svix's header names.
func TestStandardPresetVerifiesOfficialSigner(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"type":"user.created","data":{"id":"user_1"}}`)
	sign := func(ts time.Time) string {
		s, err := wh.Sign("msg_2Lh9KRb0pzN4LePd3XiA4M", ts, body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rolled, _ := standardwebhooks.NewWebhook("whsec_" + "c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=")
	oldSig, _ := rolled.Sign("msg_2Lh9KRb0pzN4LePd3XiA4M", now, body)
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	hdr := func(prefix, ts, sig string) func(string) string {
		h := http.Header{}
		h.Set(prefix+"-id", "msg_2Lh9KRb0pzN4LePd3XiA4M")
		h.Set(prefix+"-timestamp", ts)
		h.Set(prefix+"-signature", sig)
		return func(name string) string { return strings.Join(h.Values(name), ",") }
	}
	sig := automation.Signature{Preset: automation.PresetStandard, Secret: secret}
	tests := []struct {
		name   string
		sig    automation.Signature
		header func(string) string
		body   []byte
		ok     bool
	}{
		{"official signature", sig, hdr("webhook", unix(now), sign(now)), body, true},
		{"one of several, space-separated", sig, hdr("webhook", unix(now), oldSig+" "+sign(now)), body, true},
		{"svix header names", sig, hdr("svix", unix(now), sign(now)), body, true},
		{"4 minutes old", sig, hdr("webhook", unix(now.Add(-4*time.Minute)), sign(now.Add(-4*time.Minute))), body, true},
		{"6 minutes old", sig, hdr("webhook", unix(now.Add(-6*time.Minute)), sign(now.Add(-6*time.Minute))), body, false},
		{"6 minutes ahead", sig, hdr("webhook", unix(now.Add(6*time.Minute)), sign(now.Add(6*time.Minute))), body, false},
		{"other secret only", sig, hdr("webhook", unix(now), oldSig), body, false},
		{"changed body", sig, hdr("webhook", unix(now), sign(now)), append([]byte(" "), body...), false},
		{"timestamp not the signed one", sig, hdr("webhook", unix(now.Add(time.Second)), sign(now)), body, false},
		{"v2 entries ignored", sig, hdr("webhook", unix(now), strings.Replace(sign(now), "v1,", "v2,", 1)), body, false},
		{"no headers", sig, func(string) string { return "" }, body, false},
		{"secret without prefix works as in the libraries", automation.Signature{Preset: automation.PresetStandard, Secret: automation.Secret(strings.TrimPrefix(secret, "whsec_"))},
			hdr("webhook", unix(now), sign(now)), body, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := automation.VerifySignature(tt.sig, tt.header, tt.body, now)
			if (err == nil) != tt.ok {
				t.Fatalf("VerifySignature = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
