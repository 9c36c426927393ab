package engine

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// privateAddrError is a dial refused by the SSRF guard.
type privateAddrError struct {
	addr   netip.Addr
	reason string
}

func (e *privateAddrError) Error() string {
	return fmt.Sprintf("address %s is private (%s): HTTP steps may not reach private networks; "+
		"set FLOWD_ALLOW_PRIVATE_NETWORKS=true to allow them", e.addr, e.reason)
}

// Special-purpose ranges of the IANA IPv4 and IPv6 registries that are not
// globally reachable, beyond what netip's predicates (loopback, private,
// link-local, multicast, unspecified) cover. Some ranges hold a few global
// anycast services (192.0.0.9, 2001:1::1); refusing those too is harmless.
var special = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved (IETF protocol assignments)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "reserved (deprecated 6to4 relay)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes broadcast
	{netip.MustParsePrefix("::/96"), "reserved (deprecated IPv4-compatible)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64"},
	{netip.MustParsePrefix("100::/64"), "reserved (discard-only)"},
	{netip.MustParsePrefix("100:0:0:1::/64"), "reserved (dummy prefix)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo tunnel"},
	{netip.MustParsePrefix("2001::/23"), "reserved (IETF protocol assignments)"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved (documentation)"},
	{netip.MustParsePrefix("3fff::/20"), "reserved (documentation)"},
	{netip.MustParsePrefix("5f00::/16"), "reserved (segment routing)"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// global6 is where IANA allocates global unicast IPv6: anything else,
	// once the forms above are judged, is reserved or local.
	global6 = netip.MustParsePrefix("2000::/3")
)

// blocked says why addr is not a public unicast address, or "" if it is.
// IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged by
// that address, since they can reach it.
func blocked(addr netip.Addr) string {
	addr = addr.Unmap() // ::ffff:0:0/96
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64.Contains(addr):
			if r := blocked(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return r + ", embedded in " + addr.String()
			}
		case sixToFour.Contains(addr):
			if r := blocked(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return r + ", embedded in " + addr.String()
			}
		}
	}
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsPrivate():
		return "private range"
	case addr.IsLinkLocalUnicast():
		return "link-local, such as cloud metadata"
	case addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, s := range special {
		if s.prefix.Contains(addr) {
			return s.reason
		}
	}
	if addr.Is6() && !global6.Contains(addr) && !nat64.Contains(addr) {
		return "reserved (not global unicast)"
	}
	return ""
}

// guardControl refuses, before the socket connects, every address the
// resolver produced that is not public. Checking at dial time covers every
// resolved address, DNS rebinding and redirects alike.
func guardControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("engine: dial %s: %w", address, err)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("engine: dial %s: not an IP address", address)
	}
	if r := blocked(addr.WithZone("")); r != "" {
		return &privateAddrError{addr: addr.WithZone(""), reason: r}
	}
	return nil
}
