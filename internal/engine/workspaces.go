package engine

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/pyexec/pyexec/internal/workspace"
)

// Workspaces: named file trees of a key that outlive runs
// (docs/workspaces.md). internal/workspace keeps them; the engine checks
// who asks (workspaceFor in tenancy.go) before every call and hands the
// manager the caller, which checks the owner again.

// The workspace types the API encodes.
type (
	WorkspaceInfo    = workspace.Info
	WorkspaceFile    = workspace.File
	WorkspaceVersion = workspace.Version
	WorkspaceCommit  = workspace.Commit
	WorkspaceStats   = workspace.Stats
	WorkspaceLimits  = workspace.UploadLimits
)

// WorkspaceRef names a workspace: its owner (empty: the caller's own; only
// an admin may name another) and its name.
type WorkspaceRef struct {
	Owner string
	Name  string
}

// WorkspaceHead, as a version, is the current one.
const WorkspaceHead = workspace.Head

var (
	ErrWorkspaceNotFound    = workspace.ErrNotFound                                                                 // 404
	ErrWorkspaceExists      = workspace.ErrExists                                                                   // 409
	ErrWorkspaceQuota       = workspace.ErrQuota                                                                    // 413
	ErrWorkspaceLimit       = workspace.ErrLimit                                                                    // 413
	ErrWorkspaceInvalid     = workspace.ErrInvalid                                                                  // 400
	ErrWorkspaceUnsupported = workspace.ErrUnsupported                                                              // 501
	ErrWorkspacesDisabled   = fmt.Errorf("%w: workspaces are not enabled on this server", workspace.ErrUnsupported) // 501
	// ErrWorkspaceMounts: this server keeps workspaces but its jails
	// cannot mount them; the error wraps the reason.
	ErrWorkspaceMounts = fmt.Errorf("%w: this server's jails cannot mount workspaces", workspace.ErrUnsupported) // 501
)

// runWorkspace checks, before admission, the workspace a run names: req's
// caller must own one of that name (another key's is ErrWorkspaceNotFound,
// as for an unknown one), and this node's jails must be able to mount it.
func (e *Engine) runWorkspace(ctx context.Context, req Request) error {
	if req.Workspace == "" {
		return nil
	}
	m, wc, wr, err := e.workspaceFor(ctx, Caller{Name: req.Caller}, WorkspaceRef{Name: req.Workspace}, "")
	if err != nil {
		return err
	}
	if _, err := m.Get(ctx, wc, wr); err != nil {
		return err
	}
	return e.canMountWorkspaces()
}

// canMountWorkspaces: ErrWorkspaceMounts, with the reason, when this
// node's jails cannot mount a workspace. A workspace no run could use is
// not created; those that exist can still be read and deleted.
func (e *Engine) canMountWorkspaces() error {
	if e.deps.WorkspaceMounts == nil {
		return ErrWorkspaceMounts
	}
	if err := e.deps.WorkspaceMounts(); err != nil {
		return fmt.Errorf("%w: %w", ErrWorkspaceMounts, err)
	}
	return nil
}

// CreateWorkspace makes an empty workspace (version 0) owned by c; a zero
// quota takes the server's default. ErrWorkspaceMounts when this node's
// jails cannot mount one.
func (e *Engine) CreateWorkspace(ctx context.Context, c Caller, name string, quotaBytes int64) (WorkspaceInfo, error) {
	m, wc, _, err := e.workspaceFor(ctx, c, WorkspaceRef{Name: name}, "")
	if err != nil {
		return WorkspaceInfo{}, err
	}
	if err := e.canMountWorkspaces(); err != nil {
		return WorkspaceInfo{}, err
	}
	return m.Create(ctx, wc, name, quotaBytes)
}

// Workspace returns one workspace.
func (e *Engine) Workspace(ctx context.Context, c Caller, ref WorkspaceRef) (WorkspaceInfo, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return WorkspaceInfo{}, err
	}
	return m.Get(ctx, wc, wr)
}

// Workspaces lists c's workspaces; with all, an admin's lists every key's.
func (e *Engine) Workspaces(ctx context.Context, c Caller, all bool) ([]WorkspaceInfo, error) {
	if e.deps.Workspaces == nil {
		return nil, ErrWorkspacesDisabled
	}
	wc := workspace.Caller{Name: c.Name, Admin: c.Admin}
	if c.Name == "" {
		return nil, nil
	}
	owner := c.Name
	if all {
		if !c.Admin {
			return nil, fmt.Errorf("%w: all=true lists every key's workspaces and needs an operator key; leave it out to list this key's", ErrInvalid)
		}
		owner = workspace.AllOwners
		e.appendAction(ctx, actionRecord{Action: actionListAllWs, Caller: c.Name, Admin: true})
	}
	return e.deps.Workspaces.List(ctx, wc, owner)
}

// DeleteWorkspace removes a workspace and its versions.
func (e *Engine) DeleteWorkspace(ctx context.Context, c Caller, ref WorkspaceRef) error {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return err
	}
	return m.Delete(ctx, wc, wr)
}

// WorkspaceVersions lists the kept versions, oldest first.
func (e *Engine) WorkspaceVersions(ctx context.Context, c Caller, ref WorkspaceRef) ([]WorkspaceVersion, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return nil, err
	}
	return m.Versions(ctx, wc, wr)
}

// RestoreWorkspace makes a new version equal to version n.
func (e *Engine) RestoreWorkspace(ctx context.Context, c Caller, ref WorkspaceRef, n int64) (WorkspaceCommit, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return WorkspaceCommit{}, err
	}
	return m.Restore(ctx, wc, wr, n)
}

// WorkspaceFiles lists the entries below dir of version n.
func (e *Engine) WorkspaceFiles(ctx context.Context, c Caller, ref WorkspaceRef, n int64, dir string) ([]WorkspaceFile, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return nil, err
	}
	return m.Files(ctx, wc, wr, n, dir)
}

// OpenWorkspaceFile opens one file of version n; the caller closes it.
func (e *Engine) OpenWorkspaceFile(ctx context.Context, c Caller, ref WorkspaceRef, n int64, path string) (io.ReadCloser, WorkspaceFile, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return nil, WorkspaceFile{}, err
	}
	return m.Open(ctx, wc, wr, n, path)
}

// TarWorkspace writes a tar of the folder dir of version n to w.
func (e *Engine) TarWorkspace(ctx context.Context, c Caller, ref WorkspaceRef, n int64, dir string, w io.Writer) error {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return err
	}
	return m.Tar(ctx, wc, wr, n, dir, w)
}

// WriteWorkspaceFile writes one file (at most maxBytes) as a new version.
func (e *Engine) WriteWorkspaceFile(ctx context.Context, c Caller, ref WorkspaceRef, path string, r io.Reader, mode fs.FileMode, maxBytes int64) (WorkspaceCommit, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return WorkspaceCommit{}, err
	}
	return m.WriteFile(ctx, wc, wr, path, r, mode, maxBytes)
}

// UploadWorkspace unpacks a tar (gzip accepted) into the folder dir as a
// new version, all or nothing.
func (e *Engine) UploadWorkspace(ctx context.Context, c Caller, ref WorkspaceRef, dir string, r io.Reader, lim WorkspaceLimits) (WorkspaceCommit, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return WorkspaceCommit{}, err
	}
	return m.Upload(ctx, wc, wr, dir, r, lim)
}

// RemoveWorkspaceFile deletes a file or a folder as a new version.
func (e *Engine) RemoveWorkspaceFile(ctx context.Context, c Caller, ref WorkspaceRef, path string) (WorkspaceCommit, error) {
	m, wc, wr, err := e.workspaceFor(ctx, c, ref, actionWorkspace)
	if err != nil {
		return WorkspaceCommit{}, err
	}
	return m.Remove(ctx, wc, wr, path)
}

// WorkspaceUsage is what /health and metrics show of this node's
// workspaces. With measurements it may return ErrWorkspaceMounts: they
// are kept, but this node's jails cannot mount them.
func (e *Engine) WorkspaceUsage(ctx context.Context) (WorkspaceStats, error) {
	if e.deps.Workspaces == nil {
		return WorkspaceStats{}, ErrWorkspacesDisabled
	}
	st, err := e.deps.Workspaces.Stats(ctx)
	if err != nil {
		return st, err
	}
	return st, e.canMountWorkspaces()
}
