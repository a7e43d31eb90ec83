package sandbox

import (
	"net/netip"
	"os"
)

// Egress serves the route out of a jail whose payload has network (see
// docs/network.md). The jail keeps its own network namespace; the only
// interface besides loopback is a TUN device whose other end is handed to
// the Egress, which decides what every packet may reach. A jail with
// Network on and no Egress has no route out at all.
type Egress interface {
	// Serve takes ownership of tun, the jail's TUN device (raw IP
	// packets, no header), and serves it in the background until the
	// Egress is closed by its owner. An error fails the jail's setup.
	Serve(tun *os.File) error
}

// The addresses of the jail's side of its egress link. The jail's
// interface holds JailAddr4 (and JailAddr6) with a default route through
// it; DNSAddr4 is the only name server in its /etc/resolv.conf. They lie
// in 198.18.0.0/15, a range set aside for benchmarks that is never routed
// on the internet, and no packet to them ever leaves the Egress.
var (
	EgressJailAddr4 = netip.MustParseAddr("198.18.0.2")
	EgressDNSAddr4  = netip.MustParseAddr("198.18.0.1")
	EgressJailAddr6 = netip.MustParseAddr("fdff:7079:6578::2")
)

// EgressMTU is the MTU of the jail's egress interface: large, so that a
// download costs few packets through the userspace stack.
const EgressMTU = 65520

// EgressInterface is the name of the jail's egress interface.
const EgressInterface = "eth0"
