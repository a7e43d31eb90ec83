package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// ErrUnavailable: what the request needs is still being set up (ruff
// being downloaded at first start); the same request succeeds later. The
// API answers 503 with Retry-After.
var ErrUnavailable = errors.New("not available yet")

// LateLinter is the Linter of a server whose ruff arrives after start-up
// (fetched in the background). Until Set it refuses with ErrUnavailable;
// after Fail it refuses with ErrInvalid, as a server without ruff does.
type LateLinter struct {
	mu      sync.Mutex
	l       Linter
	failure string // set by Fail
	pending string // why it is not there yet
}

var _ Linter = (*LateLinter)(nil)

// NewLateLinter returns a LateLinter waiting for its linter; pending says
// why, e.g. "ruff is being downloaded".
func NewLateLinter(pending string) *LateLinter { return &LateLinter{pending: pending} }

// Set makes l the linter from now on.
func (x *LateLinter) Set(l Linter) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.l, x.failure = l, ""
}

// Fail records that no linter will come, and why.
func (x *LateLinter) Fail(why string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.l, x.failure = nil, why
}

// State is "ready", "starting" or "unavailable".
func (x *LateLinter) State() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.l != nil:
		return "ready"
	case x.failure != "":
		return "unavailable"
	}
	return "starting"
}

// current returns the linter, or the error a request gets without one.
func (x *LateLinter) current() (Linter, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.l != nil:
		return x.l, nil
	case x.failure != "":
		return nil, fmt.Errorf("%w: lint is not available on this server (%s)", ErrInvalid, x.failure)
	}
	return nil, fmt.Errorf("%w: lint is starting: %s; retry in a few seconds", ErrUnavailable, x.pending)
}

// Lint runs the linter once it is there.
func (x *LateLinter) Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	l, err := x.current()
	if err != nil {
		return nil, err
	}
	return l.Lint(ctx, files, rules)
}

// linterReady reports why l cannot lint now, if it cannot.
func linterReady(l Linter) error {
	if l == nil {
		return fmt.Errorf("%w: lint is not available on this server (ruff is not installed)", ErrInvalid)
	}
	if x, ok := l.(*LateLinter); ok {
		_, err := x.current()
		return err
	}
	return nil
}
