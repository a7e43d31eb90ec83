// Package e2e runs the built pyexec binary end to end: `pyexec serve` as a
// real process on a loopback port, the CLI as a user runs it, and the
// failures only a real process shows (kill -9 and restart). It has no
// non-test code.
package e2e
