package main

import (
	"net"
	"net/netip"
	"strconv"
)

// reachableURLs are the URLs the server answers on, listening on addr as
// asked by host (the host of --addr): addr's own, or, for a wildcard
// (0.0.0.0, ::, or none), the loopback's first and then those of the
// machine's interfaces (ifaceAddrs: net.InterfaceAddrs), of IPv4 only
// when IPv4's wildcard was asked or the socket is IPv4's. IPv6 link-local addresses are left
// out (a URL would need their zone). wildcard says which case it was.
func reachableURLs(addr net.Addr, host string, ifaceAddrs func() ([]net.Addr, error)) (urls []string, wildcard bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return []string{"http://" + addr.String()}, false
	}
	port := strconv.Itoa(tcp.Port)
	// IPv4 only when IPv4's wildcard was asked, or the socket is IPv4's
	// (a machine without IPv6).
	only4 := host == "0.0.0.0" || tcp.IP.To4() != nil
	urls = []string{"http://" + net.JoinHostPort("127.0.0.1", port)}
	if !only4 {
		urls = append(urls, "http://"+net.JoinHostPort("::1", port))
	}
	as, err := ifaceAddrs()
	if err != nil {
		return urls, true
	}
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || (only4 && !ip.Is4()) {
			continue
		}
		urls = append(urls, "http://"+net.JoinHostPort(ip.String(), port))
	}
	return urls, true
}
