package engine

import (
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Why an execution's context was cancelled (context.Cause).
var (
	errKilled   = errors.New("killed on request")
	errShutdown = errors.New("server shutting down")
)

// Exit codes of executions that did not end on their own, as a shell would
// report them.
const (
	exitTimeout = 124
	exitKilled  = 137
	exitNoRun   = 1 // the payload never ran
)

// Wire error messages of the ends the payload did not choose.
const (
	msgKilled       = "execution was killed"
	msgKilledQueued = "execution was killed before it started"
	msgCallerGone   = "the caller cancelled the request"
	msgNodeLost     = "the server stopped while this execution was running"
)

// outcome fills the final fields of r from how the run ended, all but
// stdout and stderr (publishedOutput.settle). cause is context.Cause of
// the run's context (nil if it was not cancelled); parse decodes the
// driver's report.
func (e *Engine) outcome(r *record, p *plan, res sandbox.Result, runErr, cause error, parse func([]byte) (Report, error)) {
	r.FinishedAt = ptr(now())
	r.StdoutTruncated, r.StderrTruncated = res.StdoutTruncated, res.StderrTruncated
	r.CPUTimeMs = res.CPUTime.Milliseconds()
	r.PeakMemoryBytes = res.PeakMemory
	r.DurationMs = res.WallTime.Milliseconds()
	if res.WallTime == 0 && r.StartedAt != nil {
		r.DurationMs = r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
	}
	r.ExitCode = res.ExitCode

	var netLimit *networkLimitError
	switch {
	case runErr != nil:
		fail(r, ReasonSetupError, "sandbox rejected the execution: "+runErr.Error(), exitNoRun)
	case errors.Is(cause, errShutdown):
		fail(r, ReasonNodeLost, msgNodeLost, exitKilled)
	case errors.Is(cause, errKilled):
		markKilled(r, msgKilled)
	case errors.As(cause, &netLimit):
		fail(r, ReasonNetworkLimit, netLimit.Error(), exitKilled)
	case cause != nil:
		markKilled(r, msgCallerGone)
	default:
		e.classify(r, p, res, parse)
	}
}

// classify maps a run that ended by itself.
func (e *Engine) classify(r *record, p *plan, res sandbox.Result, parse func([]byte) (Report, error)) {
	switch res.Status {
	case sandbox.StatusOK, sandbox.StatusError:
		// A Python exception is a completed execution with a non-zero
		// exit code; the driver's report says which exception.
		if preCommandFailed(r, p, res) {
			return
		}
		r.Status = StatusCompleted
		e.applyReport(r, res.Channel, parse)
	case sandbox.StatusTimeout:
		code := exitTimeout
		if res.Signal == 0 && res.ExitCode != 0 {
			code = res.ExitCode
		}
		fail(r, ReasonTimeout, timeoutMessage(p.timeout), code)
		r.TimedOut = true
	case sandbox.StatusOOM:
		fail(r, ReasonOOM, "out of memory: "+res.Reason, res.ExitCode)
	case sandbox.StatusOutputLimit:
		fail(r, ReasonOutputLimit, "output limit exceeded: "+res.Reason, res.ExitCode)
	case sandbox.StatusSetupError:
		fail(r, ReasonSetupError, "sandbox setup failed: "+res.Reason, exitNoRun)
	default:
		// StatusKilled without a kill from us: the jail went away under
		// the payload.
		fail(r, ReasonSetupError, "the sandbox ended unexpectedly: "+res.Reason, exitKilled)
	}
}

// applyReport maps the driver's structured report. The payload can write
// fd 3 itself, so a report that does not parse is ignored: the exit code
// and output still tell the story.
func (e *Engine) applyReport(r *record, channel []byte, parse func([]byte) (Report, error)) {
	if len(channel) == 0 {
		return
	}
	rep, err := parse(channel)
	if err != nil {
		e.log.Debug("ignoring unparsable driver report", "execution_id", r.ID, "err", err)
		return
	}
	r.ErrorType, r.ErrorLine, r.Error, r.Result = rep.ErrorType, rep.ErrorLine, rep.Error, rep.Result
	r.Outputs, r.OutputsTruncated = keepOutputs(rep.Outputs)
	r.OutputsTruncated = r.OutputsTruncated || rep.OutputsTruncated
	r.Results = rep.Results
}

func fail(r *record, reason, msg string, code int) {
	r.Status, r.Reason, r.Error = StatusFailed, reason, msg
	if code == 0 {
		code = exitNoRun
	}
	r.ExitCode = code
}

func markKilled(r *record, msg string) {
	r.Status, r.Reason, r.Error, r.ExitCode = StatusKilled, ReasonKilled, msg, exitKilled
	if r.FinishedAt == nil {
		r.FinishedAt = ptr(now())
	}
}

// merge keeps what a run produced in a record that someone else already
// made final (a kill that won the race to write): the status and the
// reason stay, the output and measurements are added.
func merge(dst, run *record) {
	dst.Stdout, dst.Stderr, dst.Output = run.Stdout, run.Stderr, run.Output
	dst.StdoutTruncated, dst.StderrTruncated = run.StdoutTruncated, run.StderrTruncated
	dst.CPUTimeMs, dst.PeakMemoryBytes, dst.DurationMs = run.CPUTimeMs, run.PeakMemoryBytes, run.DurationMs
	dst.Files, dst.FilesOmitted = run.Files, run.FilesOmitted
	if dst.StartedAt == nil {
		dst.StartedAt = run.StartedAt
	}
}

func ptr(t time.Time) *time.Time { return &t }
