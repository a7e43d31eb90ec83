package sandbox

import "errors"

// Sentinel errors. Callers compare with errors.Is.
var (
	// ErrInvalidSpec: the Spec cannot be run as given (a caller error).
	ErrInvalidSpec = errors.New("invalid sandbox spec")
	// ErrUnsupported: this platform or host cannot build a jail.
	ErrUnsupported = errors.New("sandboxing is not supported on this host")
	// ErrJailUsed: a prepared jail was asked to run a second payload.
	ErrJailUsed = errors.New("jail already used")
	// ErrNoOwnNetns: the jail has no network namespace of its own to reach
	// into (unsafe mode, or a forked jail with network, which shares its
	// fork server's).
	ErrNoOwnNetns = errors.New("the jail has no network namespace of its own")
)
