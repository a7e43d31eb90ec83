// Package enginetest starts a real engine for the tests of the packages
// above it (the API, the MCP server): embedded JetStream in a temporary
// directory, real jails, the host's interpreters. Where jails cannot be
// built the test is skipped with the reason. Only tests import it.
package enginetest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Deps returns the collaborators a test adds (environments, artifacts, a
// linter, the jails for sessions...), given the store and the jails.
type Deps func(st *store.NATS, jails *sandbox.Manager) engine.Deps

// Start starts a real engine with cfg for t. deps, if not nil, adds
// collaborators; Store, Runner, Driver and Logger are always filled in, and
// Interpreters with the discovered ones unless deps set it. The engine and
// the store are closed when the test ends.
func Start(t testing.TB, cfg engine.Config, deps Deps) *engine.Engine {
	t.Helper()
	return start(t, cfg, deps, false)
}

// StartWithWorkspaces is Start with workspaces: the jails get workspace
// slots, and the engine a workspace manager in a temporary directory (on
// one node: the local disk is their store). deps may set Workspaces
// itself. It skips where the jails cannot mount workspaces (not root).
func StartWithWorkspaces(t testing.TB, cfg engine.Config, deps Deps) *engine.Engine {
	t.Helper()
	return start(t, cfg, deps, true)
}

func start(t testing.TB, cfg engine.Config, deps Deps, workspaces bool) *engine.Engine {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real jails; skipped with -short")
	}
	var jcfg sandbox.Config
	if workspaces {
		jcfg.WorkspaceSlots = filepath.Join(t.TempDir(), "slots")
	}
	jails, err := sandbox.New(jcfg)
	if err != nil {
		t.Skipf("needs a host that can isolate payloads (root, namespaces, cgroups): %v", err)
	}
	if workspaces {
		// Closed last (cleanups run in reverse): the slots are unmounted
		// once every jail is gone.
		t.Cleanup(func() {
			if err := jails.Close(); err != nil {
				t.Errorf("closing the jails: %v", err)
			}
		})
		if err := jails.Workspaces(); err != nil {
			t.Skipf("these jails cannot mount workspaces: %v", err)
		}
	}
	ctx := context.Background()
	emb, err := store.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	st, err := store.Open(ctx, emb.Conn(), store.Config{}, store.FollowersOn(emb.FollowConn()))
	if err != nil {
		t.Fatal(err)
	}
	var d engine.Deps
	if deps != nil {
		d = deps(st, jails)
	}
	d.Store, d.Runner, d.Driver, d.Logger = st, jails, engine.RunnerDriver{}, slog.New(slog.DiscardHandler)
	if workspaces {
		if d.Workspaces == nil {
			d.Workspaces, err = workspace.OpenLocal(workspace.Config{Dir: filepath.Join(t.TempDir(), "workspaces")})
			if err != nil {
				t.Fatal(err)
			}
		}
		d.WorkspaceMounts = jails.Workspaces
	}
	if d.Snapshots == nil && cfg.Snapshots.Key.IsZero() {
		// Sessions' snapshots in the same store, under a key of the test's.
		dir := t.TempDir()
		if cfg.Snapshots.Key, err = snapshot.LoadKey(dir); err != nil {
			t.Fatal(err)
		}
		d.Snapshots, cfg.Snapshots.SpoolDir = st, dir
	}
	if d.Interpreters == nil {
		pythons, err := pyenv.Discover(ctx, pyenv.OptionsFromEnv(os.Getenv))
		if err != nil {
			t.Skipf("no python interpreter: %v", err)
		}
		d.Interpreters = engine.PyenvInterpreters{Set: pythons}
	}
	eng, err := engine.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		eng.Close(cctx)
		jails.Wait()
	})
	return eng
}

// Interpreter is one interpreter for every python_version, with the host
// directory its jail must mount (empty: none beyond the system's).
type Interpreter struct{ Path, Mount string }

// Lookup always answers the one interpreter.
func (i Interpreter) Lookup(string) (engine.Interpreter, error) {
	in := engine.Interpreter{Version: "3", Path: i.Path}
	if i.Mount != "" {
		in.Mounts = []string{i.Mount}
	}
	return in, nil
}
