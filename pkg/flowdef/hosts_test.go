package flowdef

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseAllowedHosts(t *testing.T) {
	good, err := ParseAllowedHosts("allowedHosts", []string{"API.Stripe.com", " *.slack.com", "10.0.0.1"})
	if err != nil || !slices.Equal(good, []string{"api.stripe.com", "*.slack.com", "10.0.0.1"}) {
		t.Fatalf("good patterns = %v, %v", good, err)
	}
	for _, tt := range []struct{ pattern, want string }{
		{"", "allowedHosts[0]"},
		{"*", "alone"},
		{"https://api.stripe.com", "scheme"},
		{"api.stripe.com/v1", "path"},
		{"api.stripe.com:443", "port"},
		{"*.com", "two labels"},
		{"api.*.com", "only start"},
		{"user@host.com", "user info"},
		{"exa mple.com", "not a valid host name"},
	} {
		_, err := ParseAllowedHosts("allowedHosts", []string{tt.pattern})
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, "allowedHosts[0]") || !strings.Contains(e.Message, tt.want) {
			t.Errorf("pattern %q: err = %v, want a 400 naming allowedHosts[0] and %q", tt.pattern, err, tt.want)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	fence := []string{"api.stripe.com", "*.slack.com"}
	for _, tt := range []struct {
		host string
		want bool
	}{
		{"api.stripe.com", true}, {"API.STRIPE.COM.", true}, {"hooks.slack.com", true}, {"a.b.slack.com", true},
		{"slack.com", false}, {"evilslack.com", false}, {"stripe.com", false}, {"api.stripe.com.evil.io", false},
	} {
		if got := HostAllowed(fence, tt.host); got != tt.want {
			t.Errorf("HostAllowed(%v, %q) = %v, want %v", fence, tt.host, got, tt.want)
		}
	}
	if !HostAllowed(nil, "anything.example") {
		t.Error("a connection without allowedHosts is fenced")
	}
}

// TestCheckSendHost: every host form the dialler could read otherwise than
// allowedHosts' string match is refused, naming why; plain names and IP
// literals pass.
func TestCheckSendHost(t *testing.T) {
	for _, h := range []string{"api.stripe.com", "API.Stripe.COM", "api.stripe.com.", "my_host.example.com",
		"127.0.0.1", "10.0.0.5", "::1", "2001:db8::1", "::ffff:127.0.0.1", "localhost", "xn--bcher-kva.example"} {
		if err := CheckSendHost(h); err != nil {
			t.Errorf("CheckSendHost(%q) = %v, want nil", h, err)
		}
	}
	for _, tt := range []struct{ host, want string }{
		{"", "no host"},
		{"::1%.example.com", "IPv6 zone"},
		{"::ffff:127.0.0.1%x.example.com", "IPv6 zone"},
		{"fe80::1%eth0", "IPv6 zone"},
		{"a.example.com%2e", "IPv6 zone"},
		{"a.example.com..", "not a valid host name"},
		{".example.com", "not a valid host name"},
		{"a\u3002b.example.com", "xn--"},
		{"ｅｘａｍｐｌｅ.com", "xn--"},
		{"2130706433", "four decimal numbers"},
		{"127.1", "four decimal numbers"},
		{"0x7f.0.0.1", "four decimal numbers"}, // the top label is decimal: still numeric
		{"127.0.0.0x1", "four decimal numbers"},
		{"017.0.0.01", "four decimal numbers"},
		{"0x7f000001", "four decimal numbers"},
		{strings.Repeat("a", 64) + ".example.com", "not a valid host name"},
	} {
		err := CheckSendHost(tt.host)
		if err == nil || !errors.As(err, new(*Error)) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckSendHost(%q) = %v, want an error saying %q", tt.host, err, tt.want)
		}
	}
}

// TestHostAllowedRefusesZones: "[::1%25.example.com]" ends with
// ".example.com" as a string but dials ::1; a fence matches none of the
// forms CheckSendHost refuses.
func TestHostAllowedRefusesZones(t *testing.T) {
	fence := []string{"*.example.com", "example.com"}
	for _, h := range []string{"::1%.example.com", "::ffff:127.0.0.1%x.example.com", "169.254.169.254%.example.com",
		"a\u3002b.example.com", "x..example.com"} {
		if HostAllowed(fence, h) {
			t.Errorf("HostAllowed(%v, %q) = true, want false", fence, h)
		}
	}
	if !HostAllowed(fence, "api.example.com") || !HostAllowed(fence, "example.com.") {
		t.Error("the fence refuses its own hosts")
	}
	for _, p := range []string{"*.0.1", "127.1", "2130706433", "017.0.0.1"} {
		if _, err := ParseAllowedHosts("allowedHosts", []string{p}); err == nil || !strings.Contains(err.Error(), "four decimal numbers") {
			t.Errorf("pattern %q: err = %v, want a 400 asking for four decimal numbers", p, err)
		}
	}
}
