// Package run holds what the engine's executions and sessions share about
// one run of Python: its vocabulary (the Request, the Execution record's
// wire shape, statuses and reasons, rich outputs, the driver's report and
// the errors every engine call may answer) and its plan, a request
// validated and turned into what a jail runs (limits, the payload's
// environment, the interpreter, dependencies, the driver, the network
// policy).
//
// It owns the rules, not the work: it never stores, runs, queues or
// authorizes anything, and it knows nothing of callers, records or the
// store. Executions (internal/engine/executions) and sessions
// (internal/engine/sessions) build on it; the engine façade re-exports
// its public names.
package run
