// Package pool keeps jails warm. For each kind of payload in use — an
// interpreter or dependency environment, a network mode, the output and
// collection options — it builds a few jails ahead of time with the runner
// already started inside, waiting on its request pipe. An execution takes
// one, hands it its limits, files and request (sandbox.Process.HandOff),
// and the jail is destroyed after: a jail never serves two executions.
// With Config.ForkServer, a kind's warm executions are forked from a fork
// server (sandbox.Template), which imported the preloads once; a request
// that finds none ready forks one at once. Kinds of the same interpreter,
// mounts and base environment share one fork server, and session kernels
// fork from it too (ForkSession). Where the environment has some of the
// preloads, code that imports only the standard library (runner.Lean)
// forks from a lean server beside it, which imported none: forking a
// process is cheaper the less it mapped. Every fork server also imports
// the commonest standard-library modules once, which an execution gets
// from it as (and only when) it imports them. A kind whose fork server
// cannot run gets warm jails. A kind keeps a spare while in use, so
// that requests one after another each find one ready; the warm jails of
// all kinds together are bounded (Config.MaxWarm), and at that bound a
// kind short of what it wants takes a place from the kind holding the
// most, until they hold within one of each other (needs).
// Executions that cannot use a warm jail (a command that is not the
// runner's, start-up environment variables, limits above the pool's
// ceilings) run in a cold jail, transparently.
//
// The pool must never hand a jail to a second execution, and never run an
// execution with weaker limits than a cold jail would have.
package pool
