package flowdef

import (
	"fmt"
	"net/netip"
	"strings"
)

// MaxAllowedHosts bounds a connection's allowedHosts list.
const MaxAllowedHosts = 50

// ParseAllowedHosts checks a connection's allowedHosts (docs/access.md):
// host names such as "api.stripe.com", or "*.slack.com" for any host under
// slack.com. A scheme, a port, a path, an empty pattern or a wildcard that
// would match a whole top-level domain ("*", "*.com") is a 400 naming the
// entry. Patterns are returned in lower case; nil for none (no fence).
func ParseAllowedHosts(field string, hosts []string) ([]string, error) {
	if len(hosts) == 0 {
		return nil, nil
	}
	if len(hosts) > MaxAllowedHosts {
		return nil, Invalid("%s: at most %d host patterns, got %d", field, MaxAllowedHosts, len(hosts))
	}
	out := make([]string, 0, len(hosts))
	for i, h := range hosts {
		name := fmt.Sprintf("%s[%d]", field, i)
		p := strings.ToLower(strings.TrimSpace(h))
		if err := checkHostPattern(p); err != "" {
			return nil, Invalid("%s %q: %s; use a host name such as api.stripe.com, or *.slack.com for every host under slack.com", name, ClipID(h), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkHostPattern says what is wrong with a lower-cased pattern, "" if
// nothing.
func checkHostPattern(p string) string {
	switch {
	case p == "":
		return "a host pattern must not be empty"
	case strings.Contains(p, "://"):
		return "a host pattern has no scheme"
	case strings.ContainsAny(p, "/?#"):
		return "a host pattern has no path"
	case strings.Contains(p, "@"):
		return "a host pattern has no user info"
	case strings.Contains(p, ":"):
		return "a host pattern has no port"
	case p == "*":
		return "* alone would send the credential anywhere"
	case len(p) > 253:
		return "a host name is at most 253 characters"
	}
	host, wild := strings.CutPrefix(p, "*.")
	if strings.Contains(host, "*") {
		return "* may only start a pattern, as *.example.com"
	}
	labels := strings.Split(host, ".")
	if wild && len(labels) < 2 {
		return "a wildcard needs a domain of at least two labels, as *.example.com"
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "not a valid host name"
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "not a valid host name"
			}
		}
	}
	// A numeric top label is an IPv4 address: a wildcard over addresses
	// ("*.0.1") is no domain, and only the four-number form is the one a
	// step's URL may use (CheckSendHost).
	if numericLabel(labels[len(labels)-1]) {
		if a, err := netip.ParseAddr(host); wild || err != nil || !a.Is4() {
			return "an IP address is written as four decimal numbers, such as 192.0.2.1, without a wildcard"
		}
	}
	return ""
}

// HostAllowed reports whether a connection fenced to patterns may send its
// credential to host (a URL's host name as net/url parses it, without
// port). No patterns: any host. "*.example.com" matches every host under
// example.com, not example.com itself. A host in a form the dialler could
// read otherwise than this string match (CheckSendHost) matches nothing.
func HostAllowed(patterns []string, host string) bool {
	if len(patterns) == 0 {
		return true
	}
	if CheckSendHost(host) != nil {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, p := range patterns {
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

// CheckSendHost says why an HTTP step may not send to host (a URL's host
// name as net/url parses it, without port and brackets), nil if it may.
// allowedHosts match the host as a string, while the dialler reads it:
// every form on which the two could disagree is refused, so that the
// host matched is the host dialled. Refused: an IPv6 zone
// ("[::1%25.example.com]" ends with ".example.com" yet dials ::1), empty
// labels, characters outside letters, digits, "-", "_" and "." (percent-
// decoded or IDNA-mapped text: write the xn-- form), and numeric IPv4
// forms other than four decimal numbers ("2130706433", "127.1",
// "0x7f.0.0.1", "017.0.0.1"), which a C resolver reads as addresses.
// One trailing dot is allowed: it names the same host.
func CheckSendHost(host string) error {
	if host == "" {
		return Invalid("the URL has no host")
	}
	if strings.Contains(host, "%") {
		return Invalid("host %q has an IPv6 zone (%%25…): a step's URL may not name a network interface", ClipID(host))
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // an IP literal without a zone: dialled as written
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if len(name) > 253 {
		return Invalid("host %q is longer than 253 characters", ClipID(host))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return Invalid("host %q is not a valid host name (an empty or overlong label)", ClipID(host))
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return Invalid("host %q is not a plain host name: only letters, digits, '-' and '.' are allowed (write an international name in its xn-- form)", ClipID(host))
			}
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		return Invalid("host %q is a non-canonical IPv4 address: write it as four decimal numbers, such as 192.0.2.1", ClipID(host))
	}
	return nil
}

// numericLabel reports whether a top label is a number (decimal, octal or
// 0x hex): no top-level domain is, and a resolver reading "127.1" or
// "0x7f000001" as an address takes the name for one.
func numericLabel(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		l = h
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; c < '0' || c > '9' {
			return false
		}
	}
	return l != ""
}
