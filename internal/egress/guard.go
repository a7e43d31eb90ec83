package egress

import (
	"net"
	"net/netip"
)

// alwaysDenied are the ranges no policy can open: a payload must never
// reach the host, its neighbours, the cloud's metadata service or the
// private network the server lives in.
var alwaysDenied = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"127.0.0.0/8",     // loopback
		"10.0.0.0/8",      // RFC 1918
		"172.16.0.0/12",   // RFC 1918
		"192.168.0.0/16",  // RFC 1918
		"100.64.0.0/10",   // CGNAT
		"169.254.0.0/16",  // link-local, with the metadata address 169.254.169.254
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"198.18.0.0/15",   // benchmarking; the jail's own egress link lives here
		"198.51.100.0/24", // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, with the broadcast address
		"::/128",          // unspecified
		"::1/128",         // loopback
		"::ffff:0:0/96",   // IPv4-mapped
		"64:ff9b::/96",    // NAT64, which could reach IPv4 private ranges
		"64:ff9b:1::/48",  // local NAT64
		"100::/64",        // discard
		"2001::/32",       // Teredo
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Guard holds what is denied whatever the policy: the fixed ranges, the
// host's own addresses and the server's own ports.
type Guard struct {
	own   []netip.Addr
	ports map[uint16]bool
}

// NewGuard builds a Guard denying the host's own addresses (read now from
// its interfaces) and the given ports of the server (API, NATS) on every
// address.
func NewGuard(serverPorts []uint16) (*Guard, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	g := &Guard{ports: map[uint16]bool{}}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				g.own = append(g.own, ip.Unmap())
			}
		}
	}
	for _, p := range serverPorts {
		g.ports[p] = true
	}
	return g, nil
}

// Refused reasons of the guard; see Event.Reason.
const (
	ReasonIPv6        = "ipv6"
	ReasonDeniedRange = "denied_range"
	ReasonHostAddress = "host_address"
	ReasonServerPort  = "server_port"
)

// Check returns "" when a:port may be dialled as far as the guard is
// concerned, else the reason it may not. Only public IPv4 addresses pass:
// the egress does not carry IPv6.
func (g *Guard) Check(a netip.Addr, port uint16) string {
	if !a.IsValid() {
		return ReasonDeniedRange
	}
	if a.Is4In6() {
		return ReasonDeniedRange
	}
	for _, p := range alwaysDenied {
		if p.Contains(a) {
			return ReasonDeniedRange
		}
	}
	if a.Is6() {
		return ReasonIPv6
	}
	for _, own := range g.own {
		if own == a {
			return ReasonHostAddress
		}
	}
	if g.ports[port] {
		return ReasonServerPort
	}
	return ""
}
