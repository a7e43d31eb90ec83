package engine

import (
	"context"
	"io"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// The execution calls of the API, the MCP server and the CLI. Those that
// read or change an execution authorize the caller first (loadFor,
// tenancy.go), then call this node's executions
// (internal/engine/executions).

// RunSync runs req and returns its final record. With a free slot it
// runs here at once. Without one it waits for a slot if the queue has
// room (ErrOverloaded when it has none): on a single node in its caller's
// line here, in a fleet (Config.Fleet) in the fleet's queue, so that any
// node with a free slot runs it. Cancelling ctx kills the execution (it
// ends killed). Errors are ErrInvalid, ErrOverloaded, ErrClosed or a store
// failure, and for a run naming a workspace (req.Workspace, checked before
// admission) ErrWorkspaceNotFound (not req.Caller's, or none) or
// ErrWorkspaceMounts. The execution belongs to req.Caller.
func (e *Engine) RunSync(ctx context.Context, req Request) (*Execution, error) {
	if err := e.runWorkspace(ctx, req); err != nil {
		return nil, err
	}
	return e.exec.RunSync(ctx, req)
}

// Submit admits req as an async execution of req.Caller and returns its
// id once the job is durably queued. Errors are ErrInvalid,
// ErrOverloaded, ErrClosed or a store failure, and those of a workspace
// as for RunSync.
func (e *Engine) Submit(ctx context.Context, req Request) (string, error) {
	if err := e.runWorkspace(ctx, req); err != nil {
		return "", err
	}
	return e.exec.Submit(ctx, req)
}

// Get returns the record of an execution; ErrNotFound when there is none
// (or it expired), or when it is not c's.
func (e *Engine) Get(ctx context.Context, c Caller, id string) (*Execution, error) {
	r, err := e.loadFor(ctx, c, id, actionRead)
	if err != nil {
		return nil, err
	}
	if err := e.exec.WithOutput(ctx, r); err != nil {
		return nil, err
	}
	return &r.Execution, nil
}

// List returns executions, most recent first, and the cursor of the next
// page ("" on the last page). Limit defaults to 20 and is capped at 100.
// It lists the executions of opts.Owner, or every caller's with
// opts.AllOwners (an admin's listing); ErrInvalid when it has neither
// (fail closed).
func (e *Engine) List(ctx context.Context, opts ListOptions) ([]*Execution, string, error) {
	return e.exec.List(ctx, opts)
}

// Kill stops an execution wherever it runs. It returns StatusKilled if the
// execution was pending or running and is now killed, else its current
// status (a finished execution stays as it is). ErrNotFound when the
// execution does not exist or is not c's; the kill and its caller go to
// the audit trail.
func (e *Engine) Kill(ctx context.Context, c Caller, id string) (Status, error) {
	r, err := e.loadFor(ctx, c, id, "")
	if err != nil {
		return "", err
	}
	st, err := e.exec.Kill(ctx, id)
	if err == nil {
		e.appendAction(ctx, actionRecord{Action: actionKill, Caller: c.Name, Admin: c.Admin, ExecutionID: id,
			Owner: r.Owner(), Status: st})
	}
	return st, err
}

// Follow streams the events of an execution: every stored one with a Seq
// above afterSeq, then live ones. The channel is closed after the final
// status event, or when ctx ends or the engine closes. ErrNotFound when
// the execution does not exist or is not c's.
func (e *Engine) Follow(ctx context.Context, c Caller, id string, afterSeq uint64) (<-chan Event, error) {
	if _, err := e.loadFor(ctx, c, id, actionFollow); err != nil {
		return nil, err
	}
	return e.exec.Follow(ctx, id, afterSeq)
}

// ListFiles returns the files an execution produced; ErrNotFound when the
// execution does not exist or is not c's.
func (e *Engine) ListFiles(ctx context.Context, c Caller, id string) ([]FileInfo, error) {
	r, err := e.loadFor(ctx, c, id, actionFiles)
	if err != nil {
		return nil, err
	}
	return r.Files, nil
}

// OpenFile opens one file an execution produced, by its workspace-relative
// path as listed. ErrNotFound when the execution does not exist or is not
// c's, ErrFileNotFound when it has no such file.
func (e *Engine) OpenFile(ctx context.Context, c Caller, id, unsafePath string) (io.ReadCloser, FileInfo, error) {
	r, err := e.loadFor(ctx, c, id, actionFiles)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return e.exec.OpenFile(ctx, r, unsafePath)
}

// Lint checks files with the server's linter without running anything
// and without an execution record. Rules left nil are the server's. It
// fails with ErrInvalid when the server has no linter, a selector is not
// one or the profile unknown, with ErrUnavailable while ruff is still
// being fetched, and with ErrClosed after Close.
func (e *Engine) Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	return e.exec.Lint(ctx, files, rules)
}

// StoreStats reports how full the store was at its last measurement
// (every Config.EvictInterval, and after executions end).
func (e *Engine) StoreStats() StoreStats { return e.exec.StoreStats() }
