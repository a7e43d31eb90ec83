// Package fleetsess spreads sessions over a fleet of pyexec nodes that
// share one NATS cluster. A session's interpreter is a process of the node
// that created it; this package lets any node serve any session: it
// records every session in the store's registry (PYEXEC_SESSIONS), calls
// the local engine for a session it holds (no NATS round trip), forwards a
// request for a session held elsewhere to its node over NATS
// request/reply, places a new session on a node with a free slot, ends a
// session cleanly, with the reason, when its node went away, takes over a
// saved session (parked at its node's graceful shutdown, or on its last
// checkpoint when its node was lost) on whichever node needs it first,
// under compare-and-set on its registry entry (takeover.go,
// checkpoint.go), and sweeps the hibernation snapshots and checkpoints no
// session needs (sweep.go).
// For previews it names the node, and the URL it advertises, that holds a
// session or issued a preview URL (preview.go); the API relays the HTTP
// itself.
//
// It never touches a session's internals: every session operation is the
// owner's engine call, and errors travel back as the engine's sentinels so
// that the HTTP answer is the same wherever a request lands. It knows
// nothing about HTTP.
package fleetsess
