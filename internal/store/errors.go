package store

import "errors"

// Sentinel errors. Callers compare with errors.Is.
var (
	// ErrNotFound: no value is stored under the key (or it expired).
	ErrNotFound = errors.New("not found")
	// ErrExists: Create found a value already stored under the key.
	ErrExists = errors.New("key already exists")
	// ErrConflict: Update was given a revision that is no longer the
	// latest; the caller must re-read and decide again.
	ErrConflict = errors.New("revision conflict")
	// ErrNoOwner: a control message found no node owning the execution.
	ErrNoOwner = errors.New("no node owns this execution")
	// ErrTooLarge: a value exceeds what the backend accepts.
	ErrTooLarge = errors.New("value too large")
	// ErrBadCursor: a list cursor was not produced by List.
	ErrBadCursor = errors.New("invalid cursor")
	// ErrIndex: a record was written but its index entry was not; the
	// record is stored and listings repair the entry.
	ErrIndex = errors.New("index entry not written")
	// ErrClosed: the connection to the store is closed for good; retrying
	// cannot help.
	ErrClosed = errors.New("store connection closed")
)
