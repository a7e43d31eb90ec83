package runner

import (
	_ "embed"
	"strconv"
	"time"
)

// forkServerSource is the fork server (see sandbox.Template): it preloads
// modules, then forks one confined runner per execution. precopySource is
// its copying ahead of the pages executions write, run before it as one
// program.
//
//go:embed forkserver.py
var forkServerSource string

//go:embed precopy.py
var precopySource string

// ForkServerArgv is the command line of a fork server under the
// interpreter at python whose executions run driver (normally the runner
// driver; tests pass their own) waiting on RequestFD, after importing
// preload. Where it imported some, it learns which pages its executions
// write with a probe bounded to 20 s, and each execution copies them
// while it waits for its request (see ProbingForkServerArgv).
func ForkServerArgv(python, driver string, preload []string) []string {
	return forkServerArgv(python, driver, nil, preload)
}

// ProbingForkServerArgv is ForkServerArgv with the probe bounded to probe
// instead; with probe 0 or less the server runs none, and its executions
// copy nothing ahead.
func ProbingForkServerArgv(python, driver string, probe time.Duration, preload []string) []string {
	return forkServerArgv(python, driver, []string{"--probe=" + strconv.FormatFloat(max(probe.Seconds(), 0), 'g', -1, 64)}, preload)
}

func forkServerArgv(python, driver string, opts, preload []string) []string {
	argv := append([]string{python, "-B", "-c", precopySource + forkServerSource, driver}, opts...)
	return append(argv, preload...)
}

// DriverSource is the runner driver, what a fork server's executions run.
func DriverSource() string { return driverSource }

// LeanForkServerArgv is the command line of a lean fork server: as
// ForkServerArgv, but it imports none of preload (nor warms matplotlib up,
// nor probes); it only reports which of them its environment has. Code
// that needs only the standard library forks from it cheaply (see Lean).
func LeanForkServerArgv(python, driver string, preload []string) []string {
	return forkServerArgv(python, driver, []string{"--lean"}, preload)
}
