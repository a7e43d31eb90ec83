package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Messages of cells that did not end by themselves.
const (
	msgSessionDied  = "the session's interpreter ended during the cell"
	msgNoYield      = "the cell did not yield to its interrupt; the session was killed"
	msgCellRestart  = "the session was restarted during the cell"
	msgSessionEnded = "the session ended during the cell"
)

// ExecuteCell runs code in the session and returns its outcome. The
// session keeps its variables, imports and files across cells. A cell that
// exceeds its timeout is interrupted (KeyboardInterrupt); one that does
// not yield within the interrupt grace kills the session
// (CellResult.SessionEnded). ErrBusy: another cell is running.
func (m *Service) ExecuteCell(ctx context.Context, s *Live, req CellRequest) (CellResult, error) {
	id := s.id
	timeout, err := pickDuration(req.Timeout, m.lim.DefaultTimeout, m.lim.MaxTimeout, "timeout")
	if err != nil {
		return CellResult{}, err
	}
	if !m.cellTurn(ctx, s) {
		return CellResult{}, fmt.Errorf("%w: %s", ErrBusy, id)
	}
	n := 0 // the cell's number, once it runs
	defer func() {
		s.run.Unlock()
		if n > 0 {
			m.afterCell(s, n)
		}
	}()
	resumed, err := m.wake(ctx, s)
	if err != nil {
		return CellResult{}, err
	}
	s.mu.Lock()
	k, gone := s.k, s.gone
	if gone {
		s.mu.Unlock()
		return CellResult{}, fmt.Errorf("%w: %s", ErrEnded, id)
	}
	if k == nil {
		s.mu.Unlock()
		return CellResult{}, fmt.Errorf("%w: %s is restarting", ErrBusy, id)
	}
	s.count++
	restored := s.restored
	n, s.restored = s.count, nil
	s.busy, s.last = true, run.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy, s.last = false, run.Now()
		s.mu.Unlock()
	}()

	c := newCellRun(n, m.lim.OutputBytes)
	started := run.Now()
	res := CellResult{SessionID: s.id, ExecutionCount: n, Resumed: resumed, RestoredFrom: restored,
		Execution: run.Execution{ID: s.id + "-" + strconv.Itoa(n), CreatedAt: started, StartedAt: &started, PythonVersion: s.python}}
	if err := k.begin(c, runner.Cell{Number: n, Code: req.Code, EvalLastExpr: req.EvalLastExpr}); err != nil {
		k.finish(c)
		m.cellEnded(s, k, &res, msgSessionDied)
		return res, nil
	}
	timedOut := m.awaitCell(ctx, k, c, timeout)
	k.finish(c)
	finished := run.Now()
	res.FinishedAt, res.DurationMs = &finished, finished.Sub(started).Milliseconds()

	if s.use != nil {
		// The session's connections and lookups since the last cell's
		// result (a connection's event comes when it ends).
		k.syncEgress(ctx)
		res.NetworkEvents = s.use.take()
	}
	k.mu.Lock()
	res.Stdout, res.StdoutTruncated = c.stdout.buf.String(), c.stdout.truncated
	res.Stderr, res.StderrTruncated = c.stderr.buf.String(), c.stderr.truncated
	outputs, rep := slices.Clone(c.outputs), c.report
	k.mu.Unlock()

	switch {
	case rep == nil && timedOut:
		k.stop()
		m.cellEnded(s, k, &res, msgNoYield)
		run.Fail(&res.Execution, run.ReasonTimeout, run.TimeoutMessage(timeout)+"; "+msgNoYield, run.ExitTimeout)
		res.TimedOut = true
	case rep == nil:
		m.cellEnded(s, k, &res, msgSessionDied)
	default:
		res.Status, res.ExitCode = run.StatusCompleted, 0
		if rep.ErrorType != "" {
			res.ExitCode = 1
		}
		res.ErrorType, res.ErrorLine, res.Error, res.Result = rep.ErrorType, rep.ErrorLine, rep.Error, rep.Result
		res.Outputs, res.OutputsTruncated = run.KeepOutputs(outputs)
		res.OutputsTruncated = res.OutputsTruncated || rep.OutputsTruncated
		res.Results = rep.Results
		if timedOut {
			run.Fail(&res.Execution, run.ReasonTimeout, run.TimeoutMessage(timeout), run.ExitTimeout)
			res.TimedOut = true
		}
	}
	return res, nil
}

// awaitCell waits for c to end. At the timeout (or when the caller goes
// away) it interrupts the cell and waits the grace for it to yield; it
// reports whether the cell was interrupted.
func (m *Service) awaitCell(ctx context.Context, k *kernel, c *cellRun, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return false
	case <-t.C:
	case <-ctx.Done():
	}
	_ = k.proc.Signal(syscall.SIGINT)
	grace := time.NewTimer(m.cfg.InterruptGrace)
	defer grace.Stop()
	select {
	case <-c.done:
	case <-grace.C:
	}
	return true
}

// cellEnded records that the session's kernel did not survive the cell,
// and ends the session unless a restart already replaced the kernel.
func (m *Service) cellEnded(s *Live, k *kernel, res *CellResult, msg string) {
	k.stop()
	res.SessionEnded = true
	s.mu.Lock()
	replaced := s.k != k
	s.mu.Unlock()
	if replaced {
		res.SessionEnded = false
		run.Fail(&res.Execution, run.ReasonKilled, msgCellRestart, run.ExitKilled)
		return
	}
	kr := k.res
	switch kr.Status {
	case sandbox.StatusOOM:
		run.Fail(&res.Execution, run.ReasonOOM, "out of memory: "+kr.Reason+"; the session ended", kr.ExitCode)
	case sandbox.StatusTimeout:
		run.Fail(&res.Execution, run.ReasonTimeout, "the session reached its lifetime: "+kr.Reason, kr.ExitCode)
	default:
		run.Fail(&res.Execution, run.ReasonKilled, msg, kr.ExitCode)
	}
	m.endSession(s, msg)
}

// Interrupt raises KeyboardInterrupt in the session's running cell; the
// session and its variables survive. It does nothing between cells.
func (m *Service) Interrupt(s *Live) error {
	id := s.id
	s.mu.Lock()
	k, busy := s.k, s.busy
	s.mu.Unlock()
	if !busy || k == nil {
		return nil
	}
	if err := k.proc.Signal(syscall.SIGINT); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			// It ended meanwhile: nothing runs to interrupt; the cell's
			// caller is told the session ended.
			return nil
		}
		return fmt.Errorf("engine: interrupting session %s: %w", id, err)
	}
	return nil
}
