// Package egress is the only way out of a jail with network: it serves the
// TUN device in the jail's network namespace with a userspace TCP/IP stack
// (gVisor's netstack), answers the jail's DNS itself, and for every TCP
// connection decides, from the operator's policy narrowed by the request,
// whether to open a connection of its own to the destination and relay
// the bytes. Nothing is routed: a packet from the jail never reaches the
// host's network; only connections this package opens do.
//
// It must never let a payload reach an always-denied address (loopback,
// the host's own addresses, private, link-local, CGNAT, multicast and
// their IPv6 equivalents), whatever the policy says, and it fails closed:
// a connection that only a name rule allows carries nothing to the
// destination until it has proven to be for that name (a TLS ClientHello
// naming it, or HTTP/1.x request heads, read strictly by http1, each
// naming it); anything it cannot classify is refused.
//
// For the destinations of an execution's secrets and of the operator's
// HTTP rules it terminates TLS (intercept_linux.go) and writes a secret's
// value in place of its placeholder in the one field the secret's template
// names; the value must never reach the payload (responses are redacted),
// an event, a log or an error, nor any destination but the secret's own
// hosts over TLS. See docs/network.md.
//
// It is kept as one package because its parts act on one execution's state,
// the Egress: the names the DNS answered and pinned are what the TCP
// decisions check, the byte quotas and events are counted across DNS, TCP
// and the terminated streams, and the termination budget and TLS sessions
// belong to it. Split, that state would be exported to every part. What
// needs none of it is apart already: the HTTP/1 reader (http1), the CA
// (tlsca) and the test world (egresstest).
package egress
