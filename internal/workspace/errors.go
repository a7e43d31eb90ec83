package workspace

import "errors"

// Sentinel errors. Callers compare with errors.Is; the API maps them to
// statuses (ErrNotFound 404, ErrExists 409, ErrInvalid 400, ErrQuota and
// ErrLimit 413).
var (
	// ErrNotFound: no such workspace, version or file — or it belongs to
	// another key, which is told exactly the same.
	ErrNotFound = errors.New("not found")
	// ErrExists: the key already has a workspace of that name.
	ErrExists = errors.New("workspace already exists")
	// ErrInvalid: a name, path, mode or archive is not acceptable.
	ErrInvalid = errors.New("invalid")
	// ErrQuota: the change would take the workspace or the key beyond its
	// quota; nothing was changed.
	ErrQuota = errors.New("quota exceeded")
	// ErrLimit: a count or size limit other than the quota (files in an
	// archive, bytes of one file, workspaces of a key).
	ErrLimit = errors.New("limit exceeded")
	// ErrUnsupported: this host cannot do it (not Linux, or no right to
	// mount the tmpfs a writable mount needs).
	ErrUnsupported = errors.New("not supported on this host")
	// ErrCorrupt: the store holds something that does not check out (a
	// blob whose hash differs from its name, a manifest with a bad path).
	ErrCorrupt = errors.New("workspace store corrupt")

	// errRevision: a record changed since it was read (compare-and-set).
	errRevision = errors.New("record changed since read")
)
