package run

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// LateLinter is the Linter of a server whose ruff arrives after start-up
// (fetched in the background). A lint request that comes before waits for
// it, up to a bound, then is refused with ErrUnavailable; after Fail it is
// refused with ErrInvalid, as on a server without ruff.
type LateLinter struct {
	pending string        // why it is not there yet
	wait    time.Duration // how long a request waits for it
	ready   chan struct{} // closed by the first Set or Fail
	once    sync.Once

	mu      sync.Mutex
	l       Linter
	failure string // set by Fail
}

var _ Linter = (*LateLinter)(nil)

// NewLateLinter returns a LateLinter waiting for its linter; pending says
// why, e.g. "ruff is being downloaded"; a request waits up to wait for it.
func NewLateLinter(pending string, wait time.Duration) *LateLinter {
	return &LateLinter{pending: pending, wait: wait, ready: make(chan struct{})}
}

// Set makes l the linter from now on.
func (x *LateLinter) Set(l Linter) {
	x.mu.Lock()
	x.l, x.failure = l, ""
	x.mu.Unlock()
	x.once.Do(func() { close(x.ready) })
}

// Fail records that no linter will come, and why.
func (x *LateLinter) Fail(why string) {
	x.mu.Lock()
	x.l, x.failure = nil, why
	x.mu.Unlock()
	x.once.Do(func() { close(x.ready) })
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

// await waits, up to x.wait or ctx's end, for the linter to arrive or
// fail, then returns what current does.
func (x *LateLinter) await(ctx context.Context) (Linter, error) {
	t := time.NewTimer(x.wait)
	defer t.Stop()
	select {
	case <-x.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	return x.current()
}

// Lint runs the linter once it is there.
func (x *LateLinter) Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	l, err := x.await(ctx)
	if err != nil {
		return nil, err
	}
	return l.Lint(ctx, files, rules)
}

// LinterReady reports why l cannot lint, if it cannot and will not soon:
// a LateLinter still waiting for ruff passes (its Lint waits).
func LinterReady(l Linter) error {
	if l == nil {
		return fmt.Errorf("%w: lint is not available on this server (ruff is not installed)", ErrInvalid)
	}
	if x, ok := l.(*LateLinter); ok && x.State() == "unavailable" {
		_, err := x.current()
		return err
	}
	return nil
}
