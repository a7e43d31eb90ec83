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

// stdlibReadySource is its importing of common standard-library modules
// once, handed to each execution as it imports them; run before it too.
//
//go:embed stdlibready.py
var stdlibReadySource string

// forkServerBoot is a fork server's whole command-line program: it reads
// the real one and the driver from its standard input (ForkServerStdin),
// NUL between them, and runs the first. On the command line they would
// stay in the interpreter's copies of argv (4 bytes a character, several
// times over) for the server's life, and so in every fork of it.
const forkServerBoot = `# pyexec fork server. Its program follows on standard input.
import os
_src = []
while True:
    _chunk = os.read(0, 1 << 16)
    if not _chunk:
        break
    _src.append(_chunk)
_src, _nul, _DRIVER = b"".join(_src).decode().partition("\0")
if not _nul:
    raise SystemExit("pyexec fork server: no program on standard input")
_code = compile(_src, "<string>", "exec")
del _src, _chunk, _nul
exec(_code)
`

// ForkServerArgv is the command line of a fork server under the
// interpreter at python whose standard input is ForkServerStdin, after
// importing preload. Where it imported some, it learns which pages its
// executions write with a probe bounded to 20 s, and each execution
// copies them while it waits for its request (see ProbingForkServerArgv).
func ForkServerArgv(python string, preload []string) []string {
	return forkServerArgv(python, nil, preload)
}

// ProbingForkServerArgv is ForkServerArgv with the probe bounded to probe
// instead; with probe 0 or less the server runs none, and its executions
// copy nothing ahead.
func ProbingForkServerArgv(python string, probe time.Duration, preload []string) []string {
	return forkServerArgv(python, []string{"--probe=" + strconv.FormatFloat(max(probe.Seconds(), 0), 'g', -1, 64)}, preload)
}

func forkServerArgv(python string, opts, preload []string) []string {
	argv := append([]string{python, "-B", "-c", forkServerBoot}, opts...)
	return append(argv, preload...)
}

// ForkServerStdin is what a fork server reads on its standard input before
// anything else: its program, and the driver its executions run (normally
// DriverSource; tests pass their own) waiting on RequestFD.
func ForkServerStdin(driver string) []byte {
	return []byte(precopySource + stdlibReadySource + forkServerSource + "\x00" + driver)
}

// DriverSource is the runner driver, what a fork server's executions run.
func DriverSource() string { return driverSource }

// LeanForkServerArgv is the command line of a lean fork server: as
// ForkServerArgv, but it imports none of preload (nor warms matplotlib up,
// nor probes); it only reports which of them its environment has. Code
// that needs only the standard library forks from it cheaply (see Lean).
func LeanForkServerArgv(python string, preload []string) []string {
	return forkServerArgv(python, []string{"--lean"}, preload)
}
