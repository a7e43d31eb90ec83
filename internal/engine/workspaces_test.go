package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/workspace"
)

// TestWorkspaceMountsRefused: on a server whose jails cannot mount a
// workspace (not root, no isolation), creating one and running with one
// are refused with the jails' reason, and nothing runs; a workspace made
// before can still be read. A run naming a workspace that is not the
// caller's is refused as for an unknown one, before admission.
func TestWorkspaceMountsRefused(t *testing.T) {
	ws, err := workspace.OpenLocal(workspace.Config{Dir: t.TempDir(), UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ws.Create(ctx, workspace.Caller{Name: "a"}, "old", 0); err != nil {
		t.Fatal(err)
	}
	reason := errors.New("mounting a workspace into a jail needs a server running as root")
	mounts := reason
	runner := &runtest.Runner{}
	e := startWith(t, Config{}, Deps{Runner: runner, Workspaces: ws, WorkspaceMounts: func() error { return mounts }})
	a := Caller{Name: "a"}

	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrWorkspaceMounts) || !errors.Is(err, ErrWorkspaceUnsupported) || !strings.Contains(err.Error(), reason.Error()) {
			t.Errorf("%s: %v, want ErrWorkspaceMounts with the reason", what, err)
		}
	}
	_, err = e.eng.CreateWorkspace(ctx, a, "new", 0)
	refused("create", err)
	req := runtest.Script("print:hello")
	req.Caller, req.Workspace = "a", "old"
	_, err = e.eng.RunSync(ctx, req)
	refused("a sync run", err)
	_, err = e.eng.Submit(ctx, req)
	refused("an async run", err)
	if n := runner.Runs.Load(); n != 0 {
		t.Errorf("%d runs, want none", n)
	}
	if info, err := e.eng.Workspace(ctx, a, WorkspaceRef{Name: "old"}); err != nil || info.Name != "old" {
		t.Errorf("reading a workspace made before: %+v %v", info, err)
	}

	mounts = nil
	for _, c := range []struct {
		caller, name string
	}{{"b", "old"}, {"a", "nope"}} {
		req.Caller, req.Workspace = c.caller, c.name
		if _, err := e.eng.RunSync(ctx, req); !errors.Is(err, ErrWorkspaceNotFound) {
			t.Errorf("%s runs on workspace %s: %v, want not found", c.caller, c.name, err)
		}
	}
	req.Caller, req.Workspace, req.WorkspaceMode = "a", "old", "rwx"
	if _, err := e.eng.RunSync(ctx, req); !errors.Is(err, ErrInvalid) {
		t.Errorf("workspace_mode rwx: %v, want invalid", err)
	}
	if n := runner.Runs.Load(); n != 0 {
		t.Errorf("%d runs, want none", n)
	}
}
