package flowdef

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzVerifySignature: any header value is accepted only when it carries
// the right HMAC, otherwise refused with the one INVALID_SIGNATURE; a value
// computed as the sender would is always accepted.
func FuzzVerifySignature(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add(PresetGitHub, "sha256=abc", ts, []byte(`{"a":1}`))
	f.Add(PresetStripe, "t="+ts+",v1=00,v1=zz", ts, []byte(`{}`))
	f.Add(PresetStripe, "t=,v1=", "", []byte(``))
	f.Add(PresetStripe, "t=99999999999999999999,v1=ab", ts, []byte(`x`))
	f.Add(PresetSlack, "v0=00", ts, []byte(`payload`))
	f.Add(PresetSlack, "v0=", "-1", []byte(``))
	f.Add("", "sha1=ab", ts, []byte(`x`))
	f.Fuzz(func(t *testing.T, preset, value, tsHeader string, body []byte) {
		const secret = "whsec_fuzz"
		sig := Signature{Preset: preset, Secret: Secret(secret)}
		if preset == "" {
			sig.Header, sig.Prefix = "X-Sig", "sha1="
		}
		headers := map[string]string{}
		lookup := func(name string) string { return headers[strings.ToLower(name)] }
		for _, h := range []string{"x-hub-signature-256", "stripe-signature", "x-slack-signature", "x-sig"} {
			headers[h] = value
		}
		headers["x-slack-request-timestamp"] = tsHeader

		err := VerifySignature(sig, lookup, body, now)
		if err != nil {
			if err != ErrInvalidSignature {
				t.Fatalf("VerifySignature = %v, want INVALID_SIGNATURE", err)
			}
		} else {
			// Accepted: the value holds a correct MAC of the body.
			var want []byte
			switch strings.ToUpper(preset) {
			case PresetGitHub, "":
				want = mac(secret, body)
			case PresetStripe:
				want = nil // checked below against every t= it holds
			case PresetSlack:
				want = mac(secret, []byte("v0:"+strings.TrimSpace(tsHeader)+":"), body)
			default:
				t.Fatalf("preset %q accepted", preset)
			}
			if want != nil && !strings.Contains(strings.ToLower(value), hex.EncodeToString(want)) {
				t.Fatalf("accepted %q without the body's MAC", value)
			}
			if want == nil {
				found := false
				for _, item := range strings.Split(value, ",") {
					if k, v, _ := strings.Cut(strings.TrimSpace(item), "="); k == "t" {
						m := hex.EncodeToString(mac(secret, []byte(v+"."), body))
						found = found || strings.Contains(strings.ToLower(value), m)
					}
				}
				if !found {
					t.Fatalf("accepted Stripe value %q without the MAC of one of its t=", value)
				}
			}
		}

		// The sender's own signature always verifies.
		good := map[string]string{
			"x-hub-signature-256":       "sha256=" + hex.EncodeToString(mac(secret, body)),
			"stripe-signature":          "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, []byte(ts+"."), body)),
			"x-slack-signature":         "v0=" + hex.EncodeToString(mac(secret, []byte("v0:"+ts+":"), body)),
			"x-slack-request-timestamp": ts,
			"x-sig":                     "sha1=" + hex.EncodeToString(mac(secret, body)),
		}
		switch strings.ToUpper(preset) {
		case PresetGitHub, PresetStripe, PresetSlack, "":
			if err := VerifySignature(sig, func(n string) string { return good[strings.ToLower(n)] }, body, now); err != nil {
				t.Fatalf("the sender's signature for preset %q was refused: %v", preset, err)
			}
		}
	})
}
