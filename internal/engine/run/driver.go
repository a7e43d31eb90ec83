package run

import (
	"encoding/json"

	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/runner"
)

// Interpreter is a Python installation that jails can run.
type Interpreter struct {
	Version string   // e.g. "3.12.4"
	Path    string   // absolute path of the python binary
	Mounts  []string // host paths the jail must bind read-only (the prefix)
}

// Interpreters resolves the python_version of a request. Lookup("") is the
// server's default interpreter; an unknown version yields an error whose
// message lists the versions available (the engine reports it as
// ErrInvalid).
type Interpreters interface {
	Lookup(version string) (Interpreter, error)
}

// DriverOptions tell the driver how to run the entrypoint.
type DriverOptions struct {
	Args         []string // the script's arguments
	EvalLastExpr bool     // report the repr of a trailing expression
	FigureFormat string   // "png" or "svg"; empty: png
	MaxRows      int      // DataFrame rows kept in outputs; 0: the driver's default
	// DataFrames are loaded before the code runs: variable → workspace file.
	DataFrames map[string]string
}

// Report is what the driver wrote on the result channel (fd 3).
type Report struct {
	ErrorType string  // e.g. "NameError"
	ErrorLine int     // line in the user's file, 0 if unknown
	Error     string  // the exception message
	Result    *string // repr of the last expression when asked for
	Outputs   []Output
	// OutputsTruncated says the driver left outputs out (its budget).
	OutputsTruncated bool
	Results          json.RawMessage // the script's `results` dict, nil without one
}

// Driver is the Python-side runner: it wraps the user's entrypoint so that
// exceptions and the last expression come back as a structured report.
type Driver interface {
	Argv(python, entrypoint string, opts DriverOptions) []string
	// Parse decodes the report. The payload can write to fd 3 itself, so
	// the bytes are untrusted.
	Parse(report []byte) (Report, error)
}

// LiveDriver is a Driver whose outputs can be decoded while the payload
// runs; the engine then publishes them as display events. Live returns
// the decoder of one run.
type LiveDriver interface {
	Driver
	Live(emit func(Output)) LiveDecoder
}

// LiveDecoder decodes one run's result channel as it streams. Write
// receives the channel's bytes in chunks, in order, from one goroutine,
// and calls emit for each output as soon as it is complete. Once the run
// is over, Report decodes the report as Driver.Parse does, reusing the
// outputs it already decoded: the bytes of a large output (a figure) are
// decoded once per run, not twice.
type LiveDecoder interface {
	Write(chunk []byte)
	Report(channel []byte) (Report, error)
}

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
	out := ReportOf(rep)
	for _, o := range rep.Outputs {
		out.Outputs = append(out.Outputs, Output(o))
	}
	return out, nil
}

// ReportOf converts the runner's report to the engine's, all but its
// outputs (a session's kernel collects those as they stream).
func ReportOf(r runner.Report) Report {
	out := Report{Result: r.Result, Results: r.Results, OutputsTruncated: r.OutputsDropped > 0}
	if r.Error != nil {
		out.ErrorType, out.ErrorLine, out.Error = r.Error.Name, r.Error.Line, r.Error.Value
	}
	return out
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
