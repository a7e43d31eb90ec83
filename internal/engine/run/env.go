package run

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// Lint modes of a request (Request.Lint).
const (
	LintOff  = ""     // no lint
	LintWith = "true" // diagnostics alongside the result
	LintOnly = "only" // diagnostics instead of a run: the code never runs
)

// Environments resolves what a run needs beyond its interpreter and
// provides it; PyenvEnvironments implements it.
type Environments interface {
	// Resolve computes the dependency set of a project and the policy
	// warnings. Errors that are the request's fault wrap
	// pyenv.ErrBadRequirement, ErrNotAllowed, ErrPolicy or ErrTooComplex.
	Resolve(ctx context.Context, in Interpreter, files []File, entry, requirements string) (pyenv.Needs, error)
	// Acquire returns the environment of set, built if needed; a failed
	// build wraps pyenv.ErrInstall.
	Acquire(ctx context.Context, in Interpreter, set pyenv.Set, progress func(string)) (EnvLease, error)
	// Base is the base environment's requirement set (empty: none).
	Base() pyenv.Set
	// Remember gives Resolve the import analysis an earlier Resolve of
	// the same project returned (pyenv.Needs.Analysis).
	Remember(in Interpreter, files []File, entry string, an *pyenv.Analysis)
}

// EnvLease is an environment in use by one run.
type EnvLease interface {
	Python() string // the interpreter to run, inside the environment
	Dirs() []string // the directories to mount read-only
	// Skipped are detected imports no index has, left out of the
	// environment so that the program's own ImportError shows.
	Skipped() []string
	Release()
}

// Linter checks a project with ruff; *pyenv.Linter implements it
// through PyenvLinter. Zero rules mean the server's; an invalid selector
// wraps pyenv.ErrBadRule.
type Linter interface {
	Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error)
}

// EnvPlan is the part of a plan about environments, pre-commands and
// lint: what the execution does between "running" and the payload.
type EnvPlan struct {
	Entry    string        // the entrypoint, cleaned
	Driver   DriverOptions // how the driver runs it
	Needs    pyenv.Set     // the dependency set to acquire (empty: none)
	Warnings []string      // the policy's warnings
	Pre      []string      // the pre-commands
	Lint     string        // the lint mode
	// Analysis is the import detector's finding (nil: it did not run),
	// kept with a queued request (Planner.Remember).
	Analysis *pyenv.Analysis
}

// Remember gives the planner the analysis an earlier Prepare of req made
// (Plan.Env.Analysis, possibly on another node), so that preparing req
// again does not run the import detector: a restarted node runs its
// queued jobs without a detector jail each. A request whose interpreter
// is gone is left to Prepare to refuse.
func (pl *Planner) Remember(req Request, an *pyenv.Analysis) {
	if an == nil || pl.deps.Envs == nil {
		return
	}
	interp, err := pl.deps.Interpreters.Lookup(req.PythonVersion)
	if err != nil {
		return
	}
	pl.deps.Envs.Remember(interp, req.Files, path.Clean(req.Entrypoint), an)
}

// planEnv resolves the request's dependencies and checks its policy, pre
// commands and lint mode. Errors wrap ErrInvalid except failures of the
// detector itself.
func (pl *Planner) planEnv(ctx context.Context, req Request, p *Plan, entry string) error {
	p.Env = EnvPlan{Entry: entry, Driver: driverOptions(req),
		Pre: req.PreCommands, Lint: req.Lint}
	switch req.Lint {
	case LintOff:
	case LintWith, LintOnly:
		if err := LinterReady(pl.deps.Linter); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: lint must be true, false or \"only\", not %q", ErrInvalid, req.Lint)
	}
	for i, c := range req.PreCommands {
		if strings.TrimSpace(c) == "" || strings.IndexByte(c, 0) >= 0 {
			return fmt.Errorf("%w: pre_commands[%d] is empty or contains a NUL byte", ErrInvalid, i)
		}
	}
	if req.Lint == LintOnly {
		return nil
	}
	if pl.deps.Envs == nil {
		if strings.TrimSpace(req.Requirements) != "" && req.Requirements != pyenv.NoDetection {
			return fmt.Errorf("%w: requirements need dependency environments, which this engine was started without", ErrInvalid)
		}
		return nil
	}
	needs, err := pl.deps.Envs.Resolve(ctx, p.Interpreter, req.Files, entry, req.Requirements)
	switch {
	case errors.Is(err, pyenv.ErrBadRequirement), errors.Is(err, pyenv.ErrNotAllowed), errors.Is(err, pyenv.ErrPolicy), errors.Is(err, pyenv.ErrTooComplex):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return fmt.Errorf("engine: resolving requirements: %w", err)
	}
	p.Env.Needs, p.Env.Warnings, p.Env.Analysis = needs.Set, needs.Warnings, needs.Analysis
	return nil
}

// PyenvEnvironments adapts pyenv's resolver and environments.
type PyenvEnvironments struct {
	Resolver *pyenv.Resolver
	Envs     *pyenv.Environments
}

var _ Environments = PyenvEnvironments{}

func pyInterp(in Interpreter) pyenv.Interpreter {
	return pyenv.Interpreter{Full: in.Version, Path: in.Path, Mounts: in.Mounts}
}

// Resolve computes the project's dependency set.
func (p PyenvEnvironments) Resolve(ctx context.Context, in Interpreter, files []File, entry, requirements string) (pyenv.Needs, error) {
	return p.Resolver.Resolve(ctx, pyInterp(in), pyFiles(files), entry, requirements)
}

func pyFiles(files []File) []pyenv.File {
	pf := make([]pyenv.File, len(files))
	for i, f := range files {
		pf[i] = pyenv.File{Path: f.Path, Data: f.Data}
	}
	return pf
}

// Remember hands an earlier analysis of the project to the resolver.
func (p PyenvEnvironments) Remember(in Interpreter, files []File, entry string, an *pyenv.Analysis) {
	p.Resolver.Remember(pyInterp(in), pyFiles(files), entry, an)
}

// Acquire returns the environment of set.
func (p PyenvEnvironments) Acquire(ctx context.Context, in Interpreter, set pyenv.Set, progress func(string)) (EnvLease, error) {
	l, err := p.Envs.Acquire(ctx, pyInterp(in), set, progress)
	if err != nil {
		return nil, err
	}
	return pyenvLease{l}, nil
}

// Base is the base environment's requirement set.
func (p PyenvEnvironments) Base() pyenv.Set { return p.Envs.BaseSet() }

type pyenvLease struct{ l *pyenv.Lease }

func (l pyenvLease) Python() string    { return l.l.Python() }
func (l pyenvLease) Dirs() []string    { return l.l.Dirs() }
func (l pyenvLease) Skipped() []string { return l.l.Skipped }
func (l pyenvLease) Release()          { l.l.Release() }

// PyenvLinter adapts pyenv's ruff linter.
type PyenvLinter struct{ L *pyenv.Linter }

var _ Linter = PyenvLinter{}

// Lint runs ruff on the project.
func (p PyenvLinter) Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	pf := make([]pyenv.File, len(files))
	for i, f := range files {
		pf[i] = pyenv.File{Path: f.Path, Data: f.Data}
	}
	return p.L.Lint(ctx, pf, rules)
}
