package cgroups

import "errors"

// Sentinel errors. Callers compare with errors.Is.
var (
	// ErrUnsupported: this host (or what the server was given of it) has
	// no cgroup hierarchy the jails can be confined in.
	ErrUnsupported = errors.New("not supported on this host")
	// ErrInvalidParent: the jails' parent names no cgroup the server may
	// use (a configuration error).
	ErrInvalidParent = errors.New("invalid cgroup parent")
)
