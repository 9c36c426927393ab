package engine

import (
	"net"
	"net/http"
	"time"
)

// GuardedTransport is an HTTP transport with the engine's SSRF rule: unless
// allowPrivate, every dial to a loopback, private, link-local or otherwise
// non-public address is refused at connect time, as for HTTP steps. Other
// outbound calls made for a flow (an OAuth2 token endpoint) use it, so the
// rule has one implementation.
func GuardedTransport(allowPrivate bool) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = guardControl
	}
	return &http.Transport{
		Proxy:                 nil, // a proxy would dial for us and bypass the check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          20,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
}
