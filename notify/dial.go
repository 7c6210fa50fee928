package notify

import (
	"fmt"
	"net/netip"
	"syscall"
)

// metadataAddrs are the clouds' instance metadata services, which answer
// with credentials to whoever on the instance asks (AWS, GCP, Azure and
// Oracle at 169.254.169.254, AWS over IPv6 at fd00:ec2::254, Alibaba at
// 100.100.100.200). The IPv6 and Alibaba ones are not link-local, so
// they are named.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true,
	netip.MustParseAddr("fd00:ec2::254"):   true,
	netip.MustParseAddr("100.100.100.200"): true,
}

// nat64 is the well-known NAT64 prefix (RFC 6052): an address in it is
// an IPv4 address reached through a translator, and is judged as that.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refusedAs says why ip may not be dialed without AllowPrivate, or ""
// when it may: it is a loopback, link-local, unspecified or cloud
// metadata address (IPv4-mapped and NAT64 forms included).
func refusedAs(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:16]))
	}
	switch {
	case metadataAddrs[ip]:
		return "a cloud metadata address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified(), ip.Is4() && ip.As4()[0] == 0:
		// 0.0.0.0/8 is "this network": Linux connects 0.0.0.0 to itself.
		return "an unspecified address"
	}
	return ""
}

// RefusedError is the error of a dial to an address that notifications
// may not reach.
type RefusedError struct {
	Addr   netip.Addr
	Reason string // "a loopback address", …
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s is %s, refused (start with --notify-allow-private to allow)", e.Addr, e.Reason)
}

// control is the dialer's Control: it runs for every connection, after
// DNS and before connect(2), on the address about to be dialed, so
// neither a name that resolves to a refused address nor one that changes
// its answer between a check and the dial (DNS rebinding) gets through.
func (s *Sender) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("notify: dialing %s %q: not an IP address and port", network, address)
	}
	if !s.cfg.AllowPrivate {
		if why := refusedAs(ap.Addr()); why != "" {
			return &RefusedError{Addr: ap.Addr().WithZone(""), Reason: why}
		}
	}
	if s.dialGuard != nil {
		return s.dialGuard(address)
	}
	return nil
}
