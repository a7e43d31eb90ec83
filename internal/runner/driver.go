package runner

import (
	_ "embed"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// driverSource is the Python driver. It travels on argv (python -c), so the
// user cannot overwrite it in the writable workspace; tests keep it well under
// the kernel's 128 KiB limit for a single argument.
//
//go:embed driver.py
var driverSource string

// ChannelFD is the descriptor of the result channel for a driver started
// without a jail; a jail serves sandbox.Spec.ResultChannel on its relay
// instead, which the driver finds in its environment (PYEXEC_RELAY).
const ChannelFD = 3

// DefaultEntrypoint is the file run when Options.Entrypoint is empty.
const DefaultEntrypoint = "main.py"

// DefaultMaxRows is the number of DataFrame rows kept when Options.MaxRows
// is zero.
const DefaultMaxRows = 100

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
	// FigureFormat is how matplotlib figures are returned: "png" (the
	// default, image/png) or "svg" (image/svg+xml).
	FigureFormat string
	// MaxRows bounds the rows of a DataFrame or Series kept in its
	// text/html and application/json outputs; zero means DefaultMaxRows.
	MaxRows int
	// DataFrames are loaded with pandas before the user's code runs: each
	// key (a Python identifier) becomes a global DataFrame read from the
	// workspace file it names (.csv, .tsv, .json, .parquet, .xlsx). The
	// environment must provide pandas (and a parquet or Excel engine for
	// those); otherwise the run ends with an ImportError in the report.
	DataFrames map[string]string
	// ReportFD is the descriptor the report is written to; zero means
	// ChannelFD. The driver moves it to a private close-on-exec descriptor
	// before user code runs, so the user's subprocesses never inherit it;
	// in a jail it holds no descriptor at all while user code runs.
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
	if opts.FigureFormat != "" {
		argv = append(argv, "--figure-format", opts.FigureFormat)
	}
	if opts.MaxRows > 0 {
		argv = append(argv, "--max-rows", strconv.Itoa(opts.MaxRows))
	}
	names := make([]string, 0, len(opts.DataFrames))
	for name := range opts.DataFrames {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		argv = append(argv, "--dataframe", name+"="+opts.DataFrames[name])
	}
	argv = append(argv, "--", entry)
	return append(argv, opts.Args...)
}

// ErrInvalidOptions is wrapped by Options.Validate.
var ErrInvalidOptions = errors.New("invalid runner options")

// Validate reports options the driver would refuse: an unknown figure
// format, a negative row count, or a DataFrame name that is not a Python
// identifier or whose path is empty or absolute.
func (o Options) Validate() error {
	switch {
	case o.FigureFormat != "" && o.FigureFormat != "png" && o.FigureFormat != "svg":
		return fmt.Errorf("%w: figure format %q (want png or svg)", ErrInvalidOptions, o.FigureFormat)
	case o.MaxRows < 0:
		return fmt.Errorf("%w: negative max rows", ErrInvalidOptions)
	}
	for name, p := range o.DataFrames {
		if !isIdentifier(name) {
			return fmt.Errorf("%w: dataframe name %q is not a Python identifier", ErrInvalidOptions, name)
		}
		if p == "" || path.IsAbs(p) || strings.ContainsRune(p, 0) {
			return fmt.Errorf("%w: dataframe %s: path %q must name a workspace file", ErrInvalidOptions, name, p)
		}
	}
	return nil
}

// isIdentifier approximates str.isidentifier; the driver checks again
// with Python's own rule.
func isIdentifier(s string) bool {
	for i, r := range s {
		letter := r == '_' || unicode.IsLetter(r)
		if !letter && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}
