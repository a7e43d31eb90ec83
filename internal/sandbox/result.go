package sandbox

import (
	"fmt"
	"time"
)

// Status is the final classification of a run.
type Status string

// The final classifications. Every run ends in exactly one of them.
const (
	StatusOK          Status = "ok"           // exited 0
	StatusError       Status = "error"        // exited non-zero or died of a signal it caused
	StatusTimeout     Status = "timeout"      // wall or CPU time limit reached
	StatusOOM         Status = "oom"          // memory limit reached, killed by the kernel
	StatusOutputLimit Status = "output_limit" // stdout or stderr exceeded its cap
	StatusKilled      Status = "killed"       // stopped by the caller (context cancelled)
	StatusSetupError  Status = "setup_error"  // the jail could not be built; the payload never ran
)

// Stream names an output stream of the payload.
type Stream int

// The payload's output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
	// Channel is the result channel (fd 3), passed to the OutputFunc only
	// when Spec.StreamChannel is set.
	Channel Stream = 3
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case Channel:
		return "channel"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// OutputFunc receives the payload's output live, in order per stream, as it
// arrives. p is only valid during the call. It must not block for long: the
// payload's pipe is not drained while it runs.
type OutputFunc func(s Stream, p []byte)

// Result is what a run produced. Stdout and Stderr hold at most the
// configured number of bytes; the Truncated flags say whether more was
// written.
type Result struct {
	Status Status
	// Reason is a human-readable explanation for any status but ok/error,
	// e.g. "wall time limit of 2s exceeded" or the setup step that failed.
	Reason   string
	ExitCode int // exit status; 128+signal when killed by a signal
	Signal   int // the terminating signal, 0 if the payload exited

	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool
	StderrTruncated bool
	// Channel holds what the payload wrote to fd 3 when Spec.ResultChannel
	// was set (at most ChannelBytes).
	Channel []byte
	// Files are the workspace files Spec.Collect asked for, in walk order;
	// FilesOmitted counts files left out by its caps.
	Files        []CollectedFile
	FilesOmitted int

	WallTime   time.Duration // from payload start to its end
	CPUTime    time.Duration // user+sys of every process of the jail
	PeakMemory int64         // bytes, high-water mark of the jail's cgroup
}

// exitInfo is how the payload ended, as reported by the jail's init.
type exitInfo struct {
	Exited   bool
	ExitCode int
	Signal   int
}

// ending collects what the parent observed while the payload ran; classify
// turns it into a Status. Precedence matters: a run killed for a timeout
// also dies of SIGKILL, and an OOM kill also looks like a signal death.
type ending struct {
	exit        exitInfo
	haveExit    bool
	cancelled   bool
	wallTimeout bool
	cpuTimeout  bool
	oomKilled   bool
	outputLimit Stream
	limits      Limits
	// initSaid is the first line the jail's init wrote to its stderr, if
	// any: why a jail that ended under its payload did.
	initSaid string
}

func (e ending) classify() (Status, string) {
	switch {
	case e.outputLimit != 0:
		limit := e.limits.StdoutBytes
		if e.outputLimit == Stderr {
			limit = e.limits.StderrBytes
		}
		return StatusOutputLimit, fmt.Sprintf("%s exceeded the limit of %d bytes", e.outputLimit, limit)
	case e.wallTimeout:
		return StatusTimeout, fmt.Sprintf("wall time limit of %s exceeded", e.limits.WallTime)
	case e.cpuTimeout:
		return StatusTimeout, fmt.Sprintf("cpu time limit of %s exceeded", e.limits.CPUTime)
	case e.cancelled:
		return StatusKilled, "killed on request"
	case e.oomKilled:
		return StatusOOM, fmt.Sprintf("memory limit of %d bytes exceeded", e.limits.MemoryBytes)
	case !e.haveExit && e.initSaid != "":
		return StatusKilled, "the jail ended before the payload reported an exit status; its init said: " + e.initSaid
	case !e.haveExit:
		return StatusKilled, "the jail ended before the payload reported an exit status"
	case e.exit.Signal == sigXCPU:
		return StatusTimeout, fmt.Sprintf("cpu time limit of %s exceeded", e.limits.CPUTime)
	case e.exit.Signal == sigXFSZ:
		return StatusError, fmt.Sprintf("file size limit of %d bytes exceeded", e.limits.FileSizeBytes)
	case e.exit.Exited && e.exit.ExitCode == 0:
		return StatusOK, ""
	default:
		return StatusError, ""
	}
}

// exitCode maps how the payload ended to a shell-style exit code.
func (x exitInfo) exitCode() int {
	if x.Exited {
		return x.ExitCode
	}
	return 128 + x.Signal
}

// Signal numbers that classification needs; identical on every Linux
// architecture we build for.
const (
	sigKill = 9
	sigXCPU = 24
	sigXFSZ = 25
)
