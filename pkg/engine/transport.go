package engine

import (
	"net"
	"net/http"
	"time"
)

// MaxIdleConnsPerHost bounds the idle connections an outbound transport
// keeps, to one host and in all: as many as run workers may call at once.
const MaxIdleConnsPerHost = 256

// GuardedTransport is an HTTP transport with the engine's SSRF rule: unless
// allowPrivate, every dial to a loopback, private, link-local or otherwise
// non-public address is refused at connect time, as for HTTP steps. Other
// outbound calls made for a flow (an OAuth2 token endpoint) use it, so the
// rule has one implementation.
//
// It keeps up to MaxIdleConnsPerHost idle connections to each host: the
// run workers (up to 256) call the same few services over and over, and
// with net/http's default of two, all but two of the connections of a busy
// host were closed after each call and dialled again for the next (a TCP
// handshake per call, and a socket in TIME_WAIT). A reused connection was
// dialled to an address the guard accepted, so reuse keeps the rule.
func GuardedTransport(allowPrivate bool) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = guardControl
	}
	return &http.Transport{
		Proxy:                 nil, // a proxy would dial for us and bypass the check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
}
