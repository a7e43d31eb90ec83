package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Lint modes of a request (Request.Lint).
const (
	LintOff  = ""     // no lint
	LintWith = "true" // diagnostics alongside the result
	LintOnly = "only" // diagnostics instead of a run: the code never runs
)

// EventInstall carries a line of installer progress while an execution
// waits for its environment.
const EventInstall EventType = "install"

// Environments resolves what an execution needs beyond its interpreter
// and provides it; PyenvEnvironments implements it.
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
}

// EnvLease is an environment in use by one execution.
type EnvLease interface {
	Python() string // the interpreter to run, inside the environment
	Dirs() []string // the directories to mount read-only
	// Skipped are detected imports no index has, left out of the
	// environment so that the program's own ImportError shows.
	Skipped() []string
	Release()
}

// skippedWarning is the result's warning about a detected import that
// was left out.
func skippedWarning(name string) string {
	return fmt.Sprintf("imported distribution %s is not installed: no package index has it", name)
}

// Linter checks a project with ruff; *pyenv.Linter implements it
// through PyenvLinter. Zero rules mean the server's; an invalid selector
// wraps pyenv.ErrBadRule.
type Linter interface {
	Lint(ctx context.Context, files []File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error)
}

// envPlan is the part of a plan about environments, pre-commands and lint.
type envPlan struct {
	entry    string
	dopts    DriverOptions
	needs    pyenv.Set
	warnings []string
	pre      []string
	lint     string
}

// planEnv resolves the request's dependencies and checks its policy, pre
// commands and lint mode. Errors wrap ErrInvalid except failures of the
// detector itself.
func (e *Engine) planEnv(ctx context.Context, req Request, p *plan, entry string) error {
	p.env = envPlan{entry: entry, dopts: driverOptions(req),
		pre: req.PreCommands, lint: req.Lint}
	switch req.Lint {
	case LintOff:
	case LintWith, LintOnly:
		if err := linterReady(e.deps.Linter); err != nil {
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
	if e.deps.Envs == nil {
		if strings.TrimSpace(req.Requirements) != "" && req.Requirements != pyenv.NoDetection {
			return fmt.Errorf("%w: requirements need dependency environments, which this engine was started without", ErrInvalid)
		}
		return nil
	}
	needs, err := e.deps.Envs.Resolve(ctx, p.interpreter, req.Files, entry, req.Requirements)
	switch {
	case errors.Is(err, pyenv.ErrBadRequirement), errors.Is(err, pyenv.ErrNotAllowed), errors.Is(err, pyenv.ErrPolicy), errors.Is(err, pyenv.ErrTooComplex):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return fmt.Errorf("engine: resolving requirements: %w", err)
	}
	p.env.needs, p.env.warnings = needs.Set, needs.Warnings
	return nil
}

// enterEnv runs the steps between "running" and the payload: lint, then
// the environment (installing it if needed, with progress events). It
// returns the spec to run and a release func, or a final record when the
// execution ends here (lint only, install failure).
func (e *Engine) enterEnv(ctx, sctx context.Context, id string, p *plan, r *record) (sandbox.Spec, func(), *record) {
	spec := p.spec
	if p.env.lint != LintOff {
		diags, err := e.deps.Linter.Lint(ctx, e.planFiles(p), pyenv.LintRules{})
		if err != nil {
			done := *r
			fail(&done, ReasonSetupError, "lint failed: "+err.Error(), exitNoRun)
			done.FinishedAt = ptr(now())
			return spec, nil, &done
		}
		r.Lint = diags
		if r.Lint == nil {
			r.Lint = []pyenv.Diagnostic{}
		}
		if p.env.lint == LintOnly {
			done := *r
			done.Status, done.ExitCode, done.FinishedAt = StatusCompleted, 0, ptr(now())
			return spec, nil, &done
		}
	}
	release := func() {}
	python := p.interpreter.Path
	if e.deps.Envs != nil { // an empty set runs in the base environment once it is built
		lease, err := e.deps.Envs.Acquire(ctx, p.interpreter, p.env.needs, func(line string) {
			e.publishEvent(sctx, id, EventInstall, line)
		})
		if err != nil {
			done := *r
			reason, msg := ReasonInstallError, err.Error()
			if !errors.Is(err, pyenv.ErrInstall) {
				reason, msg = ReasonSetupError, "preparing the environment: "+msg
			}
			fail(&done, reason, msg, exitNoRun)
			done.FinishedAt = ptr(now())
			return spec, nil, &done
		}
		release, python = lease.Release, lease.Python()
		spec.Mounts = slices.Clone(spec.Mounts)
		for _, d := range lease.Dirs() {
			spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: d})
		}
		for _, n := range lease.Skipped() {
			r.Warnings = append(slices.Clip(r.Warnings), skippedWarning(n))
		}
	}
	spec.Argv = withPreCommands(p.env.pre, e.deps.Driver.Argv(python, p.env.entry, p.env.dopts))
	return spec, release, nil
}

func (e *Engine) planFiles(p *plan) []File {
	out := make([]File, len(p.spec.Files))
	for i, f := range p.spec.Files {
		out[i] = File{Path: f.Path, Data: f.Data, Mode: f.Mode}
	}
	return out
}

// preScript runs the pre-commands, each with /bin/sh -c in order, then
// execs the payload. The commands arrive as arguments, never spliced into
// the script. Each starts with fds 0-2 only (in a jail the result channel
// is no descriptor at all; unjailed, fd 3 is closed for it). A failing
// command makes the runner driver start in its place with PYEXEC_PRE_FAILED
// set: the driver reports it on the result channel and ends the run with
// the command's exit status, running no user code.
const preScript = `n=$1; shift; i=1
while [ "$i" -le "$n" ]; do
  /bin/sh -c "$1" </dev/null 3>&-
  rc=$?
  if [ "$rc" -ne 0 ]; then shift $((n-i+1)); export PYEXEC_PRE_FAILED="$i $rc"; exec "$@"; fi
  shift; i=$((i+1))
done
exec "$@"`

// preFailMarker starts the channel line of a failed pre-command (the
// driver writes it; see preScript).
const preFailMarker = "pyexec-pre-command-failed"

// withPreCommands wraps argv so that the pre-commands run first, in the
// same jail, with the same limits.
func withPreCommands(pre, argv []string) []string {
	if len(pre) == 0 {
		return argv
	}
	out := []string{"/bin/sh", "-c", preScript, "pyexec-pre", strconv.Itoa(len(pre))}
	out = append(out, pre...)
	return append(out, argv...)
}

// preCommandFailed records a run that ended in a failing pre-command as
// python-executor did, where the commands and the script were one shell
// line: completed, with that command's exit code and output (the script
// never ran). Reason and a warning say which command it was. The exit
// code is the process's, never the channel's: user code that writes the
// marker itself changes only the reason and warning of its own run.
func preCommandFailed(r *record, p *plan, res sandbox.Result) bool {
	if len(p.env.pre) == 0 || res.ExitCode == 0 || !bytes.HasPrefix(res.Channel, []byte(preFailMarker+" ")) {
		return false
	}
	f := strings.Fields(string(res.Channel))
	if len(f) < 3 {
		return false
	}
	i, err := strconv.Atoi(f[1])
	if err != nil || i < 1 || i > len(p.env.pre) {
		return false
	}
	r.Status, r.Reason, r.ExitCode = StatusCompleted, ReasonPreCommand, res.ExitCode
	r.Warnings = append(r.Warnings, fmt.Sprintf("pre_commands[%d] %q failed with exit code %d; the script did not run", i-1, p.env.pre[i-1], res.ExitCode))
	return true
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
	pf := make([]pyenv.File, len(files))
	for i, f := range files {
		pf[i] = pyenv.File{Path: f.Path, Data: f.Data}
	}
	return p.Resolver.Resolve(ctx, pyInterp(in), pf, entry, requirements)
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
