package run

import (
	"fmt"

	"github.com/pyexec/pyexec/internal/workspace"
)

// WorkspaceUse is the workspace a run mounts at /workspace: one of its
// owner's, by name.
type WorkspaceUse struct {
	Owner    string
	Name     string
	ReadOnly bool
}

// WorkspaceOutcome is what became of a run's workspace, on its record: the
// commit of what the run left there (version, conflicts, refused files),
// or, when it could not be made, Error, and the workspace stays at Base.
type WorkspaceOutcome struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	workspace.Commit
	Error string `json:"error,omitempty"`
}

// workspaceUse checks the workspace fields of req.
func workspaceUse(req Request) (*WorkspaceUse, error) {
	if req.Workspace == "" {
		if req.WorkspaceMode != "" {
			return nil, fmt.Errorf("%w: a workspace_mode without a workspace", ErrInvalid)
		}
		return nil, nil
	}
	mode, err := workspace.ParseMode(req.WorkspaceMode)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &WorkspaceUse{Owner: req.Caller, Name: req.Workspace, ReadOnly: mode == workspace.ReadOnly}, nil
}
