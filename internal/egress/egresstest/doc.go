// Package egresstest builds a closed test world for network tests: a test
// re-runs itself in a network namespace of its own (Isolate), where a test
// host in a second namespace, joined by a veth pair, stands in for the
// internet. Nothing a test does there can reach beyond this machine.
package egresstest
