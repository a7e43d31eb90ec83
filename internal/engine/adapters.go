package engine

import (
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
)

// RunnerDriver is the Driver of internal/runner: the embedded Python
// driver that reports exceptions and the last expression on fd 3.
type RunnerDriver struct{}

var _ Driver = RunnerDriver{}

// Argv runs entrypoint under python through the driver.
func (RunnerDriver) Argv(python, entrypoint string, opts DriverOptions) []string {
	return runner.Argv(python, runner.Options{Entrypoint: entrypoint, Args: opts.Args, EvalLastExpr: opts.EvalLastExpr})
}

// Parse decodes the driver's report.
func (RunnerDriver) Parse(b []byte) (Report, error) {
	rep, err := runner.ParseReport(b)
	if err != nil {
		return Report{}, err
	}
	out := Report{Result: rep.Result}
	if rep.Error != nil {
		out.ErrorType, out.ErrorLine, out.Error = rep.Error.Name, rep.Error.Line, rep.Error.Value
	}
	return out, nil
}

// PyenvInterpreters adapts the interpreters pyenv discovered.
type PyenvInterpreters struct{ Set *pyenv.Interpreters }

var _ Interpreters = PyenvInterpreters{}

// Lookup resolves a python_version; the error lists the versions available.
func (p PyenvInterpreters) Lookup(version string) (Interpreter, error) {
	in, err := p.Set.Lookup(version)
	if err != nil {
		return Interpreter{}, err
	}
	return Interpreter{Version: in.Full, Path: in.Path, Mounts: in.Mounts}, nil
}
