// Package sessions holds this node's stateful sessions: one jail and one
// Python process per session for its whole life, cells run in one
// persistent __main__. It owns the registry and its caps, the kernel (a
// jail started cold or forked from a fork server) and its three pipes,
// cells with their timeouts and interrupts, the workspace's files, restarts
// and reaping. Sessions live in memory on the node that created them and
// do not survive its restart (internal/fleetsess reaches them from other
// nodes).
//
// It never checks who asks: the engine authorizes every call before it
// reaches a session (Service.Lookup, then the call on the *Live it
// returns). It never touches the store and knows nothing of executions'
// records.
package sessions
