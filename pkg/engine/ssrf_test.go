package engine

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// Special-purpose addresses of the IANA registries are refused, IPv6 forms
// embedding an IPv4 address are judged by it, and public addresses pass.
func TestBlockedSpecialPurpose(t *testing.T) {
	tests := []struct {
		addr string
		want string // part of the reason; "" for allowed
	}{
		// IPv4
		{"0.1.2.3", "unspecified"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.254", "carrier-grade NAT"},
		{"192.0.0.8", "IETF"},
		{"192.0.2.10", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "reserved"},
		{"239.255.255.250", "multicast"},
		{"172.31.255.255", "private"},
		{"8.8.4.4", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"198.20.0.1", ""},
		{"192.0.3.1", ""},
		// IPv6
		{"fec0::1", "site-local"},
		{"feff::1", "site-local"},
		{"2001::1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:2::1", "IETF"},
		{"2001:10::1", "IETF"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"100::1", "discard"},
		{"5f00::1", "segment routing"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::127.0.0.1", "loopback, embedded"},
		{"64:ff9b::10.0.0.1", "private range, embedded"},
		{"64:ff9b::100.64.1.1", "carrier-grade NAT, embedded"},
		{"64:ff9b::8.8.8.8", ""},
		{"64:ff9b:1::1", "local NAT64"},
		{"2002:7f00:1::", "loopback, embedded"},
		{"2002:0808:0808::1", ""},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::8.8.8.8", "IPv4-compatible"},
		{"::ffff:0:8.8.8.8", "not global"}, // SIIT IPv4-translated
		{"4000::1", "not global"},
		{"fd00::1", "private"},
		{"fe80::1", "link-local"},
		{"ff0e::1", "multicast"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001::1", ""},
		{"2001:4860:4860::8888", ""}, // outside 2001::/23
	}
	for _, tt := range tests {
		got := blocked(netip.MustParseAddr(tt.addr))
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("blocked(%s) = %q, want %q", tt.addr, got, tt.want)
		}
		if tt.want == "" {
			continue
		}
		// The dial guard refuses it too, with the reason in the error.
		err := guardControl("tcp", net.JoinHostPort(tt.addr, "443"), nil)
		var pe *privateAddrError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("guardControl(%s) = %v", tt.addr, err)
		}
	}
}
