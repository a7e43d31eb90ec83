package api

import (
	"context"
	"io"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// Engine is what the HTTP API needs from the execution engine. Errors are
// the engine's sentinels (engine.ErrNotFound, ErrOverloaded, ErrInvalid,
// ErrClosed), possibly wrapped; the API maps them to status codes. Every
// call that reads or changes an execution takes the caller and checks
// ownership itself: another caller's execution is ErrNotFound.
type Engine interface {
	// RunSync runs req and returns its final record.
	RunSync(ctx context.Context, req engine.Request) (*engine.Execution, error)
	// Submit queues req and returns the execution id at once.
	Submit(ctx context.Context, req engine.Request) (string, error)
	// Get returns the current record of an execution.
	Get(ctx context.Context, c engine.Caller, id string) (*engine.Execution, error)
	// Kill stops an execution and returns its status afterwards: killed, or
	// the final status it already had.
	Kill(ctx context.Context, c engine.Caller, id string) (engine.Status, error)
	// List returns executions, most recent first, and the cursor of the
	// next page ("" on the last page): those of opts.Owner, or every
	// caller's with opts.AllOwners.
	List(ctx context.Context, opts engine.ListOptions) ([]*engine.Execution, string, error)
	// Follow streams the events of an execution after afterSeq; the channel
	// closes after the final status event or when ctx ends.
	Follow(ctx context.Context, c engine.Caller, id string, afterSeq uint64) (<-chan engine.Event, error)
	// Lint checks files with ruff without running them; nil rules are the
	// server's.
	Lint(ctx context.Context, files []engine.File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error)
	// ListFiles returns the files an execution produced.
	ListFiles(ctx context.Context, c engine.Caller, id string) ([]engine.FileInfo, error)
	// OpenFile opens one of them by its listed path; engine.ErrFileNotFound
	// when the execution has no such file.
	OpenFile(ctx context.Context, c engine.Caller, id, path string) (io.ReadCloser, engine.FileInfo, error)
	// Stats is a snapshot of the engine's load.
	Stats() engine.Stats
}
