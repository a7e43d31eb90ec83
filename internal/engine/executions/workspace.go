package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/workspace"
)

// A run with a workspace (run.Plan.Workspace): the workspace is prepared
// for the run (its base version's tree, and a tmpfs for what the run
// writes) and mounted at /workspace; when the run ends, however it ends,
// what it left there is committed as the workspace's next version and the
// mount released. A run killed mid-write leaves what it had written when it
// died: the commit takes the files as they are, and the workspace moves
// from one committed version to the next, never to a half-committed one.
// A commit that fails leaves the workspace at the version the run started
// from, and the record says why (run.WorkspaceOutcome.Error).

// errNoWorkspaces: the run names a workspace, and this node has none.
var errNoWorkspaces = errors.New("this node keeps no workspaces")

// mountWorkspace prepares the workspace p names for execution id; nil
// when p names none.
func (e *Service) mountWorkspace(ctx context.Context, id string, p *run.Plan) (*workspace.Mount, error) {
	use := p.Workspace
	if use == nil {
		return nil, nil
	}
	if e.deps.Workspaces == nil {
		return nil, errNoWorkspaces
	}
	mode := workspace.ReadWrite
	if use.ReadOnly {
		mode = workspace.ReadOnly
	}
	return e.deps.Workspaces.Prepare(ctx, workspace.Caller{Name: use.Owner}, workspace.Ref{Owner: use.Owner, Name: use.Name}, mode, id)
}

// settleWorkspace commits what the run left in mt (read-write mounts),
// releases it and says what became of it. It has a deadline of its own:
// the run's context may be gone (killed, timed out).
func (e *Service) settleWorkspace(id string, p *run.Plan, mt *workspace.Mount) *run.WorkspaceOutcome {
	out := &run.WorkspaceOutcome{Name: p.Workspace.Name, Mode: string(workspace.ReadWrite)}
	out.Base, out.Version = mt.Base, mt.Base
	if mt.ReadOnly {
		out.Mode = string(workspace.ReadOnly)
	} else {
		ctx, cancel := storeCtx()
		c, err := mt.Commit(ctx)
		cancel()
		if err != nil {
			e.log.Error("committing a run's workspace", "execution_id", id, "workspace", p.Workspace.Name, "err", err)
			out.Error = fmt.Sprintf("the run's changes were not kept: %v", err)
		} else {
			out.Commit = c
		}
	}
	if err := mt.Release(); err != nil {
		e.log.Warn("releasing a run's workspace", "execution_id", id, "workspace", p.Workspace.Name, "err", err)
	}
	return out
}
