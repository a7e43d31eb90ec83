package runner

import (
	_ "embed"
	"strconv"
)

// driverSource is the Python driver. It travels on argv (python -c), so the
// user cannot overwrite it in the writable workspace; tests keep it well under
// the kernel's 128 KiB limit for a single argument.
//
//go:embed driver.py
var driverSource string

// ChannelFD is the descriptor on which the jail hands the payload its result
// channel (sandbox.Spec.ResultChannel).
const ChannelFD = 3

// DefaultEntrypoint is the file run when Options.Entrypoint is empty.
const DefaultEntrypoint = "main.py"

// Options say what the driver runs and how it reports.
type Options struct {
	// Entrypoint is the file run as __main__, relative to the working
	// directory (the workspace); empty means DefaultEntrypoint.
	Entrypoint string
	// Args follow the entry point in sys.argv.
	Args []string
	// EvalLastExpr returns the repr of the last top-level statement when it
	// is an expression whose value is not None (Report.Result); the value is
	// then not printed.
	EvalLastExpr bool
	// ReportFD is the descriptor the report is written to; zero means
	// ChannelFD. The driver moves it to a private close-on-exec descriptor
	// before user code runs, so the user's subprocesses never inherit it.
	ReportFD int
}

// Argv returns the command line that runs opts under the interpreter at
// python (an absolute path inside the jail). -B keeps the run from writing
// __pycache__ directories into the workspace; the interpreter otherwise
// starts as `python main.py` would, honouring PYTHON* variables and the user
// site directory so that what users set up (env_vars, pip install --user in
// pre_commands) keeps working.
func Argv(python string, opts Options) []string {
	entry := opts.Entrypoint
	if entry == "" {
		entry = DefaultEntrypoint
	}
	fd := opts.ReportFD
	if fd == 0 {
		fd = ChannelFD
	}
	argv := make([]string, 0, 8+len(opts.Args))
	argv = append(argv, python, "-B", "-c", driverSource, "--report-fd", strconv.Itoa(fd))
	if opts.EvalLastExpr {
		argv = append(argv, "--eval-last-expr")
	}
	argv = append(argv, "--", entry)
	return append(argv, opts.Args...)
}
