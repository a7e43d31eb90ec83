package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/workspace"
)

// A session with a workspace (Request.Workspace) mounts it at /workspace
// for its whole life: prepared once when the session is created (the
// session id names its run directory), mounted by every kernel the
// session starts (a restart keeps the changes made so far, as it keeps the
// files of /work), and committed as the workspace's next version when the
// session ends, however it ends, once its last kernel is dead. Its kernels
// start in jails of their own, never forked.

// commitTimeout bounds the commit of a session's workspace.
const commitTimeout = 30 * time.Second

// errNoWorkspaces: the session names a workspace, and this node has none.
var errNoWorkspaces = errors.New("this node keeps no workspaces")

// mountWorkspace prepares the workspace req names for s and makes s's
// release commit and release it; nothing without one.
func (m *Service) mountWorkspace(ctx context.Context, s *Live, req Request) error {
	if req.Workspace == "" {
		if req.WorkspaceMode != "" {
			return invalidf("a workspace_mode without a workspace")
		}
		return nil
	}
	mode, err := workspace.ParseMode(req.WorkspaceMode)
	if err != nil {
		return fmt.Errorf("%w: %w", run.ErrInvalid, err)
	}
	if m.deps.Workspaces == nil {
		return errNoWorkspaces
	}
	c := workspace.Caller{Name: s.caller}
	mt, err := m.deps.Workspaces.Prepare(ctx, c, workspace.Ref{Owner: s.caller, Name: req.Workspace}, mode, s.id)
	if err != nil {
		return fmt.Errorf("mounting the workspace: %w", err)
	}
	s.spec.Workspace = mt.Jail()
	envRelease := s.release
	var once sync.Once
	s.release = func() {
		once.Do(func() { m.endWorkspace(s.id, req.Workspace, mt) })
		envRelease()
	}
	return nil
}

// endWorkspace commits what the session left in its workspace (read-write
// mounts) and releases the mount. A commit that fails leaves the
// workspace at the version the session started from; it is logged.
func (m *Service) endWorkspace(id, name string, mt *workspace.Mount) {
	if !mt.ReadOnly {
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		c, err := mt.Commit(ctx)
		cancel()
		if err != nil {
			m.log.Error("committing a session's workspace", "session_id", id, "workspace", name, "err", err)
		} else {
			m.log.Info("committed a session's workspace", "session_id", id, "workspace", name, "version", c.Version,
				"changed", c.Changed, "conflicts", len(c.Conflicts), "refused", len(c.Refused))
		}
	}
	if err := mt.Release(); err != nil {
		m.log.Warn("releasing a session's workspace", "session_id", id, "workspace", name, "err", err)
	}
}
