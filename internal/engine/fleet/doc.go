// Package fleet is this node's membership in a fleet of pyexec nodes that
// share one store: its heartbeat (who it is, how busy, whether it is
// draining), the list of live nodes, taking over the entry a crashed run
// of the same name left, and declaring lost the nodes that fall silent,
// exactly one survivor per loss.
//
// It decides who is alive, nothing more: settling a lost node's
// executions is the executions' business (Deps.Settle), its sessions the
// fleet session router's (Deps.OnLost). It never reads or writes an
// execution and knows nothing of callers.
package fleet
