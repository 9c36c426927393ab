package automation

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// isClientError reports whether err is an *Error of kind kind, as a handler
// turns into a 4xx.
func isClientError(err error, kind error) bool {
	var e *Error
	return errors.As(err, &e) && errors.Is(err, kind) && e.Code != "" && e.Message != ""
}

// FuzzCursorOpen: a cursor opens only as sealed, for its own scope; any
// other string is INVALID_CURSOR; sealing round-trips.
func FuzzCursorOpen(f *testing.F) {
	c := cursors{key: []byte(strings.Repeat("k", 32))}
	f.Add("prj_a/flows", c.seal("prj_a/flows", "42"), "42")
	f.Add("prj_a/runs/flw_1", c.seal("prj_a/runs/flw_1", "2026-01-01T00:00:00Z|run_1"), "x")
	f.Add("s", "!!!.???", "")
	f.Add("s", "", "pos")
	f.Add("s", ".", "\x00")
	f.Add("s", "a.b.c", "a.b")
	f.Fuzz(func(t *testing.T, scope, cursor, pos string) {
		got, err := c.open(scope, cursor)
		if err != nil {
			if !isClientError(err, ErrInvalid) || err.(*Error).Code != "INVALID_CURSOR" {
				t.Fatalf("open(%q) = %v, want INVALID_CURSOR", cursor, err)
			}
		} else {
			// Only a sealed cursor opens: the payload is the one seal makes.
			payload, _, _ := strings.Cut(c.seal(scope, got), ".")
			if !strings.HasPrefix(cursor, payload+".") {
				t.Fatalf("open(%q) = %q, a cursor seal did not make", cursor, got)
			}
		}
		if pos == "" {
			return
		}
		sealed := c.seal(scope, pos)
		if back, err := c.open(scope, sealed); err != nil || back != pos {
			t.Fatalf("open(seal(%q)) = %q, %v", pos, back, err)
		}
		if _, err := c.open(scope+"x", sealed); err == nil {
			t.Fatalf("a cursor of scope %q opened in another scope", scope)
		}
	})
}

// FuzzCanonicalAllowlist: entries are accepted in canonical form or refused
// as ErrInvalid naming the entry; the canonical form is a fixed point.
func FuzzCanonicalAllowlist(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "10.1.2.3/8", "2001:db8::1,::ffff:192.0.2.1", "fe80::1%eth0",
		"10.0.0.0/33", "example.com", "1.2.3.4,1.2.3.4", "::/0", "0.0.0.0/0", " 1.2.3.4", "1.2.3.4/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		in := strings.Split(list, ",")
		out, err := CanonicalAllowlist(in)
		if err != nil {
			if !isClientError(err, ErrInvalid) {
				t.Fatalf("CanonicalAllowlist(%q) = %v, want ErrInvalid", in, err)
			}
			return
		}
		if len(out) > len(in) {
			t.Fatalf("%d entries became %d", len(in), len(out))
		}
		for _, s := range out {
			if _, err := netip.ParsePrefix(s); err != nil {
				if _, err := netip.ParseAddr(s); err != nil {
					t.Fatalf("canonical entry %q does not parse", s)
				}
			}
		}
		again, err := CanonicalAllowlist(out)
		if err != nil || !slices.Equal(again, out) {
			t.Fatalf("canonical %q is not a fixed point: %q, %v", out, again, err)
		}
	})
}

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
			if !isClientError(err, ErrUnauthorized) || err.(*Error).Code != "INVALID_SIGNATURE" {
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
