// Package executions runs this node's executions and keeps their records:
// the lifecycle of one run from request to final state. A sync execution
// is planned (run.Planner), admitted (Slots), recorded, run in a jail
// (Runner) with its output published as live events, and its outcome
// recorded; an async one is queued in the store and dispatched to a node
// with a free slot; a sync one without a free slot in a fleet goes through
// that queue too. It also kills (over the owner's control subject),
// follows, lists, serves files, recovers what a previous run of the node
// left unfinished, settles the executions of a node the fleet declared
// lost, and keeps the store under its size by evicting finished records.
//
// It never checks who asks: the engine authorizes every call that reads
// or changes an execution before it gets here (it loads the record with
// Load and compares Record.Owner). It knows nothing of sessions, of HTTP,
// or of which nodes are alive beyond what Deps.Alive tells.
//
// It is kept as one package because every file moves the same record
// through the same transitions (queued, running, a final state), each
// checked against the others by compare-and-set on the store: the sync
// and async paths, kill, recovery after a restart, the settling of a lost
// node's executions and eviction must agree on them.
package executions
