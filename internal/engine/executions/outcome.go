package executions

import (
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Why an execution's context was cancelled (context.Cause).
var (
	errKilled   = errors.New("killed on request")
	errShutdown = errors.New("server shutting down")
)

// Wire error messages of the ends the payload did not choose.
const (
	msgKilled       = "execution was killed"
	msgKilledQueued = "execution was killed before it started"
	msgCallerGone   = "the caller cancelled the request"
	msgNodeLost     = "the server stopped while this execution was running"
	msgStartLost    = "the store did not confirm that this execution started, so it was not run"
)

// outcome fills the final fields of r from how the run ended, all but
// stdout and stderr (publishedOutput.settle). cause is context.Cause of
// the run's context (nil if it was not cancelled); parse decodes the
// driver's report.
func (e *Service) outcome(r *Record, p *run.Plan, res sandbox.Result, runErr, cause error, parse func([]byte) (run.Report, error)) {
	r.FinishedAt = ptr(run.Now())
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
		run.Fail(&r.Execution, run.ReasonSetupError, "sandbox rejected the execution: "+runErr.Error(), run.ExitNoRun)
	case errors.Is(cause, errShutdown):
		run.Fail(&r.Execution, run.ReasonNodeLost, msgNodeLost, run.ExitKilled)
	case errors.Is(cause, errKilled):
		markKilled(r, msgKilled)
	case errors.As(cause, &netLimit):
		run.Fail(&r.Execution, run.ReasonNetworkLimit, netLimit.Error(), run.ExitKilled)
	case cause != nil:
		markKilled(r, msgCallerGone)
	default:
		e.classify(r, p, res, parse)
	}
}

// classify maps a run that ended by itself.
func (e *Service) classify(r *Record, p *run.Plan, res sandbox.Result, parse func([]byte) (run.Report, error)) {
	switch res.Status {
	case sandbox.StatusOK, sandbox.StatusError:
		// A Python exception is a completed execution with a non-zero
		// exit code; the driver's report says which exception.
		if preCommandFailed(r, p, res) {
			return
		}
		r.Status = run.StatusCompleted
		e.applyReport(r, res.Channel, parse)
	case sandbox.StatusTimeout:
		code := run.ExitTimeout
		if res.Signal == 0 && res.ExitCode != 0 {
			code = res.ExitCode
		}
		run.Fail(&r.Execution, run.ReasonTimeout, run.TimeoutMessage(p.Timeout), code)
		r.TimedOut = true
	case sandbox.StatusOOM:
		run.Fail(&r.Execution, run.ReasonOOM, "out of memory: "+res.Reason, res.ExitCode)
	case sandbox.StatusOutputLimit:
		run.Fail(&r.Execution, run.ReasonOutputLimit, "output limit exceeded: "+res.Reason, res.ExitCode)
	case sandbox.StatusSetupError:
		run.Fail(&r.Execution, run.ReasonSetupError, "sandbox setup failed: "+res.Reason, run.ExitNoRun)
	default:
		// run.StatusKilled without a kill from us: the jail went away under
		// the payload.
		run.Fail(&r.Execution, run.ReasonSetupError, "the sandbox ended unexpectedly: "+res.Reason, run.ExitKilled)
	}
}

// applyReport maps the driver's structured report. The payload can write
// fd 3 itself, so a report that does not parse is ignored: the exit code
// and output still tell the story.
func (e *Service) applyReport(r *Record, channel []byte, parse func([]byte) (run.Report, error)) {
	if len(channel) == 0 {
		return
	}
	rep, err := parse(channel)
	if err != nil {
		e.log.Debug("ignoring unparsable driver report", "execution_id", r.ID, "err", err)
		return
	}
	r.ErrorType, r.ErrorLine, r.Error, r.Result = rep.ErrorType, rep.ErrorLine, rep.Error, rep.Result
	r.Outputs, r.OutputsTruncated = run.KeepOutputs(rep.Outputs)
	r.OutputsTruncated = r.OutputsTruncated || rep.OutputsTruncated
	r.Results = rep.Results
}

func markKilled(r *Record, msg string) {
	r.Status, r.Reason, r.Error, r.ExitCode = run.StatusKilled, run.ReasonKilled, msg, run.ExitKilled
	if r.FinishedAt == nil {
		r.FinishedAt = ptr(run.Now())
	}
}

// merge keeps what a run produced in a record that someone else already
// made final (a kill that won the race to write): the status and the
// reason stay, the output and measurements are added.
func merge(dst, ran *Record) {
	dst.Stdout, dst.Stderr, dst.Output = ran.Stdout, ran.Stderr, ran.Output
	dst.StdoutTruncated, dst.StderrTruncated = ran.StdoutTruncated, ran.StderrTruncated
	dst.CPUTimeMs, dst.PeakMemoryBytes, dst.DurationMs = ran.CPUTimeMs, ran.PeakMemoryBytes, ran.DurationMs
	dst.Files, dst.FilesOmitted = ran.Files, ran.FilesOmitted
	dst.Workspace = ran.Workspace
	if dst.StartedAt == nil {
		dst.StartedAt = ran.StartedAt
	}
}

func ptr(t time.Time) *time.Time { return &t }
