// Package sessions holds this node's stateful sessions: one jail and one
// Python process per session for its whole life, cells run in one
// persistent __main__. It owns the registry and its caps, the kernel (a
// jail started cold or forked from a fork server) and its three pipes,
// cells with their timeouts and interrupts, the workspace's files, restarts
// and reaping; saving a session's state as a snapshot (through Deps.Vault),
// restoring a verified snapshot into a new session and forking a live one
// (state.go); hibernating idle sessions and resuming them on their next
// call (hibernate.go); parking them at shutdown and adopting parked ones
// (park.go); checkpointing them after cells for a node killed without
// warning (checkpoint.go); the egress of a session with network, planned by
// Deps.Network as an execution's and attached to each kernel's jail before
// the kernel starts (network.go). Sessions live in memory on the node that created them
// (internal/fleetsess reaches them from other nodes).
//
// It never checks who asks: the engine authorizes every call before it
// reaches a session (Service.Lookup, then the call on the *Live it
// returns). It never touches the store (a snapshot goes to the Vault and
// comes back verified by the engine), never reads a snapshot's state, and
// knows nothing of executions' records. It never decides a session's
// network itself (the planner does), and never starts a kernel with
// network whose egress was not attached.
//
// It is kept as one package because every part changes the same *Live
// session and its kernel under the session's one lock: a cell, a restart,
// a snapshot, a fork, hibernation, parking and a checkpoint each check
// the others' states there. Split, that state machine would be spread
// over packages that export its insides.
package sessions
