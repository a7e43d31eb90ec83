// Package provision fetches the helper programs pyexec runs on the host
// or in its jails (uv builds environments, ruff lints) when the operator
// has not named them: pinned versions, downloaded as wheels from the
// package index the server installs from, checked against SHA-256 digests
// pinned in this package before anything is unpacked, and kept under the
// data directory so that a restart finds them.
//
// It trusts no byte from the index: a wheel whose digest differs from the
// pin is refused and nothing of it is written. It never runs what it
// fetched except `TOOL --version`, to prove the binary works on this host.
package provision
