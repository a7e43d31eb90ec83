package run

import "errors"

// Sentinel errors that more than one part of the engine answers with. The
// API maps them to status codes with errors.Is; the engine re-exports them.
var (
	ErrNotFound = errors.New("execution not found") // 404
	ErrInvalid  = errors.New("invalid request")     // 400; wrapped with the detail
	ErrClosed   = errors.New("engine is shut down") // 503
	// ErrFileNotFound: the execution or session exists but has no such
	// file (404).
	ErrFileNotFound = errors.New("file not found")
	// ErrUnavailable: what the request needs is still being set up (ruff
	// being downloaded at first start); the same request succeeds later.
	// The API answers 503 with Retry-After.
	ErrUnavailable = errors.New("not available yet")
)
