package flowdef

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignVerifyRoundTrip: every preset a flow may name signs with
// SignHeaders what VerifySignature accepts, and a changed body, an old
// timestamp or another secret is refused; a custom header scheme too.
func TestSignVerifyRoundTrip(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"text":"<b>&amp;</b>"}`)
	sigs := []Signature{{Header: "X-Signature", Prefix: "sha256=", Secret: "custom-secret"}}
	for _, p := range Presets {
		secret := Secret("a-shared-secret")
		if p == PresetStandard {
			secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		}
		sigs = append(sigs, Signature{Preset: p, Secret: secret})
	}
	if len(signingSchemes) != len(Presets) {
		t.Fatalf("%d signing schemes for %d Presets a flow may name", len(signingSchemes), len(Presets))
	}
	lookup := func(h map[string]string) func(string) string {
		hh := http.Header{}
		for k, v := range h {
			hh.Set(k, v)
		}
		return func(name string) string { return strings.Join(hh.Values(name), ",") }
	}
	for _, sig := range sigs {
		name := sig.Preset + sig.Header
		h, err := SignHeaders(sig, body, "msg_1", now)
		if err != nil {
			t.Fatalf("%s: sign: %v", name, err)
		}
		if err := VerifySignature(sig, lookup(h), body, now); err != nil {
			t.Errorf("%s: its own signature is refused: %v", name, err)
		}
		if VerifySignature(sig, lookup(h), append([]byte(" "), body...), now) == nil {
			t.Errorf("%s: a changed body verified", name)
		}
		other := sig
		other.Secret = sig.Secret + "x"
		if sig.Preset == PresetStandard {
			other.Secret = "whsec_AAAA9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		}
		if VerifySignature(other, lookup(h), body, now) == nil {
			t.Errorf("%s: another secret verified", name)
		}
		if sig.Preset == PresetStripe || sig.Preset == PresetSlack || sig.Preset == PresetStandard {
			if VerifySignature(sig, lookup(h), body, now.Add(SignatureTolerance+time.Second)) == nil {
				t.Errorf("%s: a signature older than the tolerance verified", name)
			}
		}
	}
	if _, err := SignHeaders(Signature{Preset: PresetGitHub, Secret: SecretMask}, body, "", now); err == nil {
		t.Error("signed with a masked secret")
	}
}
