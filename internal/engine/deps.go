package engine

import (
	"errors"
	"log/slog"

	"github.com/pyexec/pyexec/internal/engine/executions"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Runner runs one payload in a jail; *sandbox.Manager and *pool.Pool
// implement it.
type Runner = executions.Runner

// Store is the shared state the engine runs on; *store.NATS implements it.
type Store interface {
	executions.Store
	store.Members
}

// Deps are the engine's collaborators. Store, Runner, Interpreters and
// Driver are required.
type Deps struct {
	Store        Store
	Runner       Runner
	Interpreters Interpreters
	Driver       Driver
	// Envs resolves and installs dependencies; nil refuses requests
	// with requirements and detects nothing.
	Envs Environments
	// Linter serves lint requests; nil refuses them.
	Linter Linter
	// Artifacts stores the files executions produce; nil collects none.
	Artifacts store.Artifacts
	// Snapshots keeps sessions' snapshots (with Config.Snapshots.Key);
	// nil keeps none (ErrSnapshotsDisabled).
	Snapshots SnapshotStore
	// Jails hosts sessions; nil refuses them (ErrSessionsDisabled).
	Jails Jails
	// Workspaces keeps named workspaces (workspaces.go); nil refuses
	// every workspace call (ErrWorkspacesDisabled).
	Workspaces *workspace.Manager
	// WorkspaceMounts reports whether this node's jails can mount a
	// workspace, and why not (*sandbox.Manager.Workspaces); nil: they
	// cannot. A run naming a workspace is refused with its reason
	// (ErrWorkspaceMounts) rather than run without it.
	WorkspaceMounts func() error
	// Forker, if set, forks session kernels from fork servers (Jails
	// still hosts those that do not fork).
	Forker Forker
	Logger *slog.Logger // nil discards
	// OnFinish, if set, is told about every execution this node ends (for
	// metrics). It gets a copy and must not block.
	OnFinish func(Finished)
	// OnSessionNetwork, if set, is told every network event of a session
	// of this node with network, as it happens (for metrics). It must not
	// block.
	OnSessionNetwork func(NetworkEvent)
	// WarmJails, if set, counts the warm jails ready to take, for the
	// node's heartbeat. It is called every heartbeat and must be cheap.
	WarmJails func() int
	// OnNodeLost, if set, is told the name of a node that this node
	// declared lost, after its executions were settled. Of the surviving
	// nodes exactly one is told about each loss.
	OnNodeLost func(node string)
	// OnSelfLost, if set, is called when this node learns that another
	// node declared it lost: its sessions may be resumed elsewhere, so it
	// must stop serving them (FenceSessions).
	OnSelfLost func()
	// OnSessionEnd, if set, is told the id of every session of this node
	// that ends, and whether it ended because the engine shuts down. It
	// runs on the goroutine that ends the session.
	OnSessionEnd func(id string, shutdown bool)
	// OnSessionPark, if set, is told of every session saved when the
	// engine shuts down, to be adopted by the next run of this node
	// (AdoptSession); without it, every session ends at shutdown.
	// An error says the park was not recorded.
	OnSessionPark func(p ParkedSession) error
	// OnSessionCheckpoint, if set, is told of every checkpoint a session
	// of this node was saved as (SessionConfig.CheckpointEvery), to record
	// for the fleet; OnSessionCell of the count of cells a session that
	// has a checkpoint ran, after each of its cells, before the answer
	// (it must be cheap). Without OnSessionCheckpoint no checkpoint is
	// taken. An error says the checkpoint was not recorded (or this node
	// no longer holds the session): it is deleted, the one before kept.
	OnSessionCheckpoint func(c SessionCheckpoint) error
	OnSessionCell       func(id string, cells int)
}

// Finished is what OnFinish is told of an execution that ended.
type Finished = executions.Finished

func (d Deps) validate() error {
	if d.Store == nil || d.Runner == nil || d.Interpreters == nil || d.Driver == nil {
		return errors.New("engine: Store, Runner, Interpreters and Driver are required")
	}
	return nil
}
