package automation

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
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
