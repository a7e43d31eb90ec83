// Package netns is what the server does in a jail's network namespace from
// outside it: run a function on a thread moved into the namespace of a
// process and back (Do), open a listener there (Listen), and make the jail's
// side of its egress link, a TUN device addressed and routed through
// netlink (OpenLink). The sandbox names the namespace by its jail's PID 1
// and hands the TUN device's file to its sandbox.Egress.
//
// It is the sandbox's glue, kept beside it rather than in internal/egress:
// entering a jail's namespace and creating its devices is part of building
// the jail (the payload has no capability to make or change interfaces),
// while the egress only serves the packets of a device it is handed and
// must know nothing of namespaces or jails; the sandbox in turn knows
// nothing of packets.
//
// It must never leave a thread the Go scheduler may reuse in another
// namespace: a thread that cannot go back is never unlocked, so the runtime
// ends it with its goroutine. It knows nothing of payloads, policies or
// executions.
package netns
