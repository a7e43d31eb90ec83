package engine

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// Runner runs one payload in a jail; *sandbox.Manager implements it. It
// must stop the payload promptly once ctx is cancelled.
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error)
}

// Store is the shared state the engine runs on; *store.NATS implements it.
type Store interface {
	store.Records
	store.Requests
	store.Queue
	store.Tally
	store.Events
	store.Control
	store.Audit
	store.EventReader
	store.Capacity
	store.Members
}

// Deps are the engine's collaborators. All but Logger are required.
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
	// Jails hosts sessions; nil refuses them (ErrSessionsDisabled).
	Jails Jails
	// Forker, if set, forks session kernels from fork servers (Jails
	// still hosts those that do not fork).
	Forker Forker
	Logger *slog.Logger // nil discards
	// OnFinish, if set, is told about every execution this node ends (for
	// metrics). It gets a copy and must not block.
	OnFinish func(Finished)
	// WarmJails, if set, counts the warm jails ready to take, for the
	// node's heartbeat. It is called every heartbeat and must be cheap.
	WarmJails func() int
	// OnNodeLost, if set, is told the name of a node that this node
	// declared lost, after its executions were settled. Of
	// the surviving nodes exactly one is told about each loss.
	OnNodeLost func(node string)
	// OnSessionEnd, if set, is told the id of every session of this node
	// that ends, and whether it ended because the engine shuts down. It
	// runs on the goroutine that ends the session.
	OnSessionEnd func(id string, shutdown bool)
}

// Finished is what OnFinish is told of an execution that ended: its
// record, the caller that owns it and the stdout and stderr bytes it
// kept (the record's Stdout and Stderr may be empty when the output is
// kept in its events).
type Finished struct {
	Execution
	Owner       string
	OutputBytes int64
}

func (d Deps) validate() error {
	if d.Store == nil || d.Runner == nil || d.Interpreters == nil || d.Driver == nil {
		return errors.New("engine: Store, Runner, Interpreters and Driver are required")
	}
	return nil
}
