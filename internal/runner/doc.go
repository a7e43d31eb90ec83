// Package runner holds the Python side of an execution: a small driver,
// embedded in the binary, that the jail starts instead of the user's program.
//
// The driver runs the entry file as __main__ exactly as `python main.py`
// would (sys.argv, sys.path[0], stdin, exit codes, tracebacks), optionally
// returns the repr of the last top-level expression, and writes to a
// separate channel (in a jail fetched from its PID 1 for each write, else
// fd 3), never mixed into the user's stdout:
// rich outputs as they happen (Jupyter-style MIME bundles from display(),
// _repr_*_ methods, matplotlib figures and pandas frames), then one JSON
// report about the outcome. This package builds the driver's argv and
// parses its report; it never runs anything itself and is no security
// boundary: the report comes from the user's own process and is treated as
// untrusted input.
package runner
