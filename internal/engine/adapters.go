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

// Live decodes the driver's outputs as the channel streams them, and its
// report from those outputs and the report's own line.
func (RunnerDriver) Live(emit func(Output)) LiveDecoder {
	s := runner.NewOutputScanner(func(o runner.Output) { emit(Output(o)) })
	return liveScanner{s}
}

// liveScanner is the LiveDecoder of RunnerDriver.
type liveScanner struct{ s *runner.OutputScanner }

func (l liveScanner) Write(chunk []byte) { l.s.Write(chunk) }

func (l liveScanner) Report(channel []byte) (Report, error) {
	return report(l.s.Report(channel))
}

// Parse decodes the driver's report.
func (RunnerDriver) Parse(b []byte) (Report, error) {
	return report(runner.ParseReport(b))
}

// report adapts the runner's report.
func report(rep runner.Report, err error) (Report, error) {
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
