package executions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// EventInstall carries a line of installer progress while an execution
// waits for its environment.
const EventInstall EventType = "install"

// skippedWarning is the result's warning about a detected import that
// was left out.
func skippedWarning(name string) string {
	return fmt.Sprintf("imported distribution %s is not installed: no package index has it", name)
}

// enterEnv runs the steps between "running" and the payload: lint, then
// the environment (installing it if needed, with progress events). It
// returns the spec to run and a release func, or a final record when the
// execution ends here (lint only, install failure).
func (e *Service) enterEnv(ctx, sctx context.Context, id string, p *run.Plan, r *Record) (sandbox.Spec, func(), *Record) {
	spec := p.Spec
	if p.Env.Lint != run.LintOff {
		diags, err := e.deps.Linter.Lint(ctx, e.planFiles(p), pyenv.LintRules{})
		if err != nil {
			done := *r
			run.Fail(&done.Execution, run.ReasonSetupError, "lint failed: "+err.Error(), run.ExitNoRun)
			done.FinishedAt = ptr(run.Now())
			return spec, nil, &done
		}
		r.Lint = diags
		if r.Lint == nil {
			r.Lint = []pyenv.Diagnostic{}
		}
		if p.Env.Lint == run.LintOnly {
			done := *r
			done.Status, done.ExitCode, done.FinishedAt = run.StatusCompleted, 0, ptr(run.Now())
			return spec, nil, &done
		}
	}
	release := func() {}
	python := p.Interpreter.Path
	if e.deps.Envs != nil { // an empty set runs in the base environment once it is built
		lease, err := e.deps.Envs.Acquire(ctx, p.Interpreter, p.Env.Needs, func(line string) {
			e.publishEvent(sctx, id, EventInstall, line)
		})
		if err != nil {
			done := *r
			reason, msg := run.ReasonInstallError, err.Error()
			if !errors.Is(err, pyenv.ErrInstall) {
				reason, msg = run.ReasonSetupError, "preparing the environment: "+msg
			}
			run.Fail(&done.Execution, reason, msg, run.ExitNoRun)
			done.FinishedAt = ptr(run.Now())
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
	spec.Argv = withPreCommands(p.Env.Pre, e.deps.Driver.Argv(python, p.Env.Entry, p.Env.Driver))
	return spec, release, nil
}

func (e *Service) planFiles(p *run.Plan) []run.File {
	out := make([]run.File, len(p.Spec.Files))
	for i, f := range p.Spec.Files {
		out[i] = run.File{Path: f.Path, Data: f.Data, Mode: f.Mode}
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
func preCommandFailed(r *Record, p *run.Plan, res sandbox.Result) bool {
	if len(p.Env.Pre) == 0 || res.ExitCode == 0 || !bytes.HasPrefix(res.Channel, []byte(preFailMarker+" ")) {
		return false
	}
	f := strings.Fields(string(res.Channel))
	if len(f) < 3 {
		return false
	}
	i, err := strconv.Atoi(f[1])
	if err != nil || i < 1 || i > len(p.Env.Pre) {
		return false
	}
	r.Status, r.Reason, r.ExitCode = run.StatusCompleted, run.ReasonPreCommand, res.ExitCode
	r.Warnings = append(r.Warnings, fmt.Sprintf("pre_commands[%d] %q failed with exit code %d; the script did not run", i-1, p.Env.Pre[i-1], res.ExitCode))
	return true
}
