package runner

import _ "embed"

// forkServerSource is the fork server (see sandbox.Template): it preloads
// modules, then forks one confined runner per execution.
//
//go:embed forkserver.py
var forkServerSource string

// ForkServerArgv is the command line of a fork server under the
// interpreter at python whose executions run driver (normally the runner
// driver; tests pass their own) waiting on RequestFD, after importing
// preload.
func ForkServerArgv(python, driver string, preload []string) []string {
	return append([]string{python, "-B", "-c", forkServerSource, driver}, preload...)
}

// DriverSource is the runner driver, what a fork server's executions run.
func DriverSource() string { return driverSource }

// LeanForkServerArgv is the command line of a lean fork server: as
// ForkServerArgv, but it imports none of preload (nor warms matplotlib up);
// it only reports which of them its environment has. Code that needs only
// the standard library forks from it cheaply (see Lean).
func LeanForkServerArgv(python, driver string, preload []string) []string {
	return append([]string{python, "-B", "-c", forkServerSource, driver, "--lean"}, preload...)
}
