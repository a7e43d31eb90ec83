package executions

import (
	"context"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// Lint checks files with the server's linter without running anything
// and without an execution record. Rules left nil are the server's. It
// fails with ErrInvalid when the server has no linter, a selector is not
// one or the profile unknown, with ErrUnavailable while ruff is still
// being fetched, and with ErrClosed after Close.
func (e *Service) Lint(ctx context.Context, files []run.File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	if e.stopping.Err() != nil {
		return nil, run.ErrClosed
	}
	if err := run.LinterReady(e.deps.Linter); err != nil {
		return nil, err
	}
	// The jail must not outlive the engine.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.base, cancel)()
	diags, err := e.deps.Linter.Lint(ctx, files, rules)
	switch {
	case errors.Is(err, pyenv.ErrBadRule), errors.Is(err, pyenv.ErrBadProfile):
		return nil, fmt.Errorf("%w: %w", run.ErrInvalid, err)
	case errors.Is(err, run.ErrUnavailable), errors.Is(err, run.ErrInvalid):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("engine: lint: %w", err)
	}
	if diags == nil {
		diags = []pyenv.Diagnostic{}
	}
	return diags, nil
}
