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

var (
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved4   = netip.MustParsePrefix("240.0.0.0/4") // includes broadcast
	benchmark   = netip.MustParsePrefix("198.18.0.0/15")
	ietf4       = netip.MustParsePrefix("192.0.0.0/24")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	compat4     = netip.MustParsePrefix("::/96")
)

// blocked says why addr is not a public unicast address, or "" if it is.
// IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4)
// are judged by that address, since they can reach it.
func blocked(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64.Contains(addr) || compat4.Contains(addr) && !addr.IsLoopback() && !addr.IsUnspecified():
			if r := blocked(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
				return r + ", embedded in " + addr.String()
			}
		case sixToFour.Contains(addr):
			if r := blocked(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
				return r + ", embedded in " + addr.String()
			}
		case nat64Local.Contains(addr):
			return "local NAT64"
		}
	}
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsUnspecified() || thisNetwork.Contains(addr):
		return "unspecified"
	case addr.IsPrivate():
		return "private range"
	case addr.IsLinkLocalUnicast():
		return "link-local, such as cloud metadata"
	case addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return "multicast"
	case cgnat.Contains(addr):
		return "carrier-grade NAT"
	case reserved4.Contains(addr) || benchmark.Contains(addr) || ietf4.Contains(addr):
		return "reserved"
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
