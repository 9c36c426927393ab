package automation

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
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || !strings.Contains(e.Message, "allowedHosts[0]") || !strings.Contains(e.Message, tt.want) {
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
