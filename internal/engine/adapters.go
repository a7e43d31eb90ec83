package engine

import (
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
)

// RunnerDriver is the Driver of internal/runner: the embedded Python
// driver that reports exceptions and the last expression on fd 3.
type RunnerDriver struct{}

var _ LiveDriver = RunnerDriver{}

// Argv runs entrypoint under python through the driver.
func (RunnerDriver) Argv(python, entrypoint string, opts DriverOptions) []string {
	return runner.Argv(python, runner.Options{Entrypoint: entrypoint, Args: opts.Args, EvalLastExpr: opts.EvalLastExpr,
		FigureFormat: opts.FigureFormat, MaxRows: opts.MaxRows, DataFrames: opts.DataFrames})
}

// LiveOutputs decodes the driver's outputs as the channel streams them.
func (RunnerDriver) LiveOutputs(emit func(Output)) func([]byte) {
	return runner.NewOutputScanner(func(o runner.Output) { emit(Output(o)) }).Write
}

// Parse decodes the driver's report.
func (RunnerDriver) Parse(b []byte) (Report, error) {
	rep, err := runner.ParseReport(b)
	if err != nil {
		return Report{}, err
	}
	out := Report{Result: rep.Result, Results: rep.Results, OutputsTruncated: rep.OutputsDropped > 0}
	for _, o := range rep.Outputs {
		out.Outputs = append(out.Outputs, Output(o))
	}
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
