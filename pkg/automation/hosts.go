package automation

import (
	"fmt"
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
	return ""
}

// HostAllowed reports whether a connection fenced to patterns may send its
// credential to host (a URL's host name, without port). No patterns: any
// host. "*.example.com" matches every host under example.com, not
// example.com itself.
func HostAllowed(patterns []string, host string) bool {
	if len(patterns) == 0 {
		return true
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

// HostRefused is the step error of a send a connection's allowedHosts
// refuse: it names the connection, its hosts and the refused host.
func HostRefused(c Connection, host string) string {
	return fmt.Sprintf("connection %s (%s) may only be sent to %s: refused to send it to %s",
		c.ID, c.Name, strings.Join(c.AllowedHosts, ", "), host)
}
