package executions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// storeTimeout bounds each store write of an execution's lifecycle. Those
// writes use their own context: a killed or abandoned execution must still
// be recorded.
const storeTimeout = 30 * time.Second

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// execute runs a pending execution that o owns: it marks it running, runs
// the jail with live output events, and records the outcome; one whose
// start the store never confirmed is recorded as not run (abandonStart). ctx is the
// execution's context; cancelling it (with a cause, see outcome.go) stops
// the payload. onRunning is called once the record says running. The
// returned record is the final one as stored, with stdout and stderr only
// if keepOutput: a caller that does not answer with them (an async worker)
// spares a copy of the whole output. pending is the record as this engine
// created it, if it has it (see transitionFrom), or nil.
func (e *Service) execute(ctx context.Context, o *owner, p *run.Plan, pending *Record, onRunning func(), keepOutput bool) (*Record, error) {
	started := run.Now()
	r, ok, err := e.markRunning(ctx, o, pending, started)
	if err != nil {
		// The last attempt may have been stored all the same: the record
		// must not stay running with no one to finish it.
		end := notStarted
		if ctx.Err() != nil {
			end = stoppedWaiting(context.Cause(ctx)) // killed or stopped meanwhile
		}
		done := e.abandonStart(o.id, started, end)
		if done == nil {
			return nil, err
		}
		e.log.Warn("an execution whose start was not confirmed ended without running",
			"execution_id", o.id, "status", done.Status, "err", err)
		return done, nil
	}
	if !ok {
		// Not pending any more (killed before it started, whoever did
		// recorded it; or another node took its job and runs it), or this
		// node shut down first and it is still pending.
		return r, nil
	}
	sctx, cancel := storeCtx()
	defer cancel()
	o.running.Store(true)
	onRunning()
	e.publishEvent(sctx, o.id, EventStatus, string(run.StatusRunning))
	return e.run(ctx, sctx, o, p, r, keepOutput)
}

// run runs the execution whose record r says running, and records its
// outcome (see execute). sctx bounds the store writes made while it runs.
func (e *Service) run(ctx, sctx context.Context, o *owner, p *run.Plan, r *Record, keepOutput bool) (*Record, error) {
	published := newPublishedOutput()
	out := newOutputEvents(e.cfg.FlushInterval, e.cfg.FlushBytes, func(evs []Event) {
		published.publish(sctx, e, o.id, evs)
	})
	spec, release, done := e.enterEnv(ctx, sctx, o.id, p, r)
	if done != nil {
		o.endRun()
		out.close()
		return e.finish(done)
	}
	mt, err := e.mountWorkspace(ctx, o.id, p)
	if err != nil {
		release()
		o.endRun()
		out.close()
		done := *r
		run.Fail(&done.Execution, run.ReasonSetupError, "mounting the workspace: "+err.Error(), run.ExitNoRun)
		done.FinishedAt = ptr(run.Now())
		return e.finish(&done)
	}
	if mt != nil {
		spec.Workspace = mt.Jail()
	}
	var netEvents netLog
	var eg *egress.Egress
	if spec.Network {
		eg = e.startEgress(sctx, o, p, &netEvents)
		spec.Egress = eg
	}
	live, parse := e.liveOutputs(out.write, func(t EventType, d string) {
		e.publishEvent(sctx, o.id, t, d)
	})
	res, runErr := e.deps.Runner.Run(ctx, spec, live)
	if eg != nil {
		// The payload is gone: finishing cuts what is left and emits the
		// last events before the record is made; the device goes after.
		e.teardowns.finish(o.id, eg)
	}
	release()
	out.close()

	ran := *r
	ran.NetworkEvents = netEvents.all()
	if mt != nil {
		// Every process of the run is gone: what it left is final.
		ran.Workspace = e.settleWorkspace(o.id, p, mt)
	}
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	e.outcome(&ran, p, res, runErr, cause, parse)
	published.settle(&ran, res.Stdout, res.Stderr)
	if !keepOutput {
		// Recording the outcome may wait on a busy store: let the output
		// go meanwhile (a copy is in the record or in the events).
		res.Stdout, res.Stderr = nil, nil
	}
	// The run may have outlasted sctx: saving files gets a deadline of its
	// own, and the outcome another (finish), so that slow uploads cannot
	// eat the outcome's time.
	fctx, fcancel := storeCtx()
	ran.Files, ran.FilesOmitted = e.saveFiles(fctx, o.id, res.Files), res.FilesOmitted
	fcancel()
	// The workspace is settled and the files saved within the slot: it
	// bounds the memory and the work of executions being wound up too.
	o.endRun()
	r, err = e.finish(&ran)
	if err != nil || !keepOutput || fill(r, res.Stdout, res.Stderr) {
		return r, err
	}
	octx, ocancel := storeCtx()
	defer ocancel()
	if err := e.WithOutput(octx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// markRunning moves the pending execution o owns to running on this node,
// at started. The write is retried as an outcome is (finish): a store
// that was slow or between leaders may have stored an attempt whose reply
// was lost, which the next attempt finds as this node's start. It reports
// whether the execution is now running here; false, with the record as
// stored, when it was no longer pending or this node is shutting down.
// pending is the record as this engine wrote it, or nil. A kill or a
// shutdown (ctx) stops the retries; a shutdown before any start write was
// sent leaves the execution pending, for another node.
func (e *Service) markRunning(ctx context.Context, o *owner, pending *Record, started time.Time) (*Record, bool, error) {
	pause := outcomeBackoff
	sent := false // a start write was sent: it may have been stored
	for attempt := 1; ; attempt++ {
		sctx, cancel := storeCtx()
		r, ok, err := e.transitionFrom(sctx, o.id, pending, func(r *Record) bool {
			if r.Status != run.StatusPending || !o.begin() {
				return false
			}
			r.Status, r.StartedAt, r.Node = run.StatusRunning, &started, e.cfg.Node
			sent = true
			return true
		})
		cancel()
		if err == nil {
			return r, ok || e.startedHere(r, started), nil
		}
		err = fmt.Errorf("engine: recording the start of %s: %w", o.id, err)
		if attempt == outcomeAttempts || errors.Is(err, run.ErrNotFound) || errors.Is(err, store.ErrClosed) {
			return nil, false, err
		}
		e.log.Warn("recording a start failed; retrying", "execution_id", o.id, "attempt", attempt, "err", err)
		wait := time.NewTimer(pause)
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			if !sent && errors.Is(context.Cause(ctx), errShutdown) {
				// Stopped before it began (StopUnstarted): as stored.
				return &Record{Execution: run.Execution{ID: o.id, Status: run.StatusPending}}, false, nil
			}
			return nil, false, err
		}
		pause *= 2
		pending = nil // read what the store holds
	}
}

// startedHere reports whether r is running on this node since started:
// the start this engine wrote.
func (e *Service) startedHere(r *Record, started time.Time) bool {
	return r.Status == run.StatusRunning && r.Node == e.cfg.Node &&
		r.StartedAt != nil && r.StartedAt.Equal(started)
}

// notStarted sets the final fields of an execution whose start the store
// never confirmed.
func notStarted(r *Record) {
	run.Fail(&r.Execution, run.ReasonSetupError, msgStartLost, run.ExitNoRun)
}

// abandonStart ends an execution whose start could not be confirmed, with
// the final fields end sets, if the record says pending or running here
// since started: either way the payload never ran, and the record says
// so (no started_at). It returns the record if it is final now, nil if
// not. A failure is logged: the record may then stay running, with no
// node to finish it, until this node's orphan sweep finds it.
func (e *Service) abandonStart(id string, started time.Time, end func(*Record)) *Record {
	ctx, cancel := storeCtx()
	defer cancel()
	r, ok, err := e.transition(ctx, id, func(r *Record) bool {
		if r.Status != run.StatusPending && !e.startedHere(r, started) {
			return false
		}
		r.StartedAt = nil
		end(r)
		if r.FinishedAt == nil {
			r.FinishedAt = ptr(run.Now())
		}
		return true
	})
	if errors.Is(err, run.ErrNotFound) {
		return nil // never stored
	}
	if err != nil {
		e.log.Error("recording an execution whose start was lost", "execution_id", id, "err", err)
		return nil
	}
	if ok {
		e.ended(ctx, r)
	}
	if !r.Status.Final() {
		return nil
	}
	return r
}

// Recording an outcome is retried: a result must not be lost to a store
// that was briefly slow or unreachable. Each attempt has storeTimeout.
const outcomeAttempts = 4

// outcomeBackoff is the pause before the second attempt; it doubles.
const outcomeBackoff = 500 * time.Millisecond

// finish stores the outcome of a run. A record that someone else already
// made final keeps its status: a kill is never overwritten by a late
// completion, but the run's output is added to it. Nothing but the record
// write is on this path before the record is final: the final status
// event and the audit record follow it, and followers read through a
// connection of their own (store.FollowersOn), so neither can delay it.
func (e *Service) finish(ran *Record) (*Record, error) {
	var (
		r       *Record
		madeEnd bool
		err     error
	)
	pause := outcomeBackoff
	for attempt := 1; ; attempt++ {
		r, madeEnd, err = e.recordOutcome(ran)
		if err == nil || attempt == outcomeAttempts ||
			errors.Is(err, run.ErrNotFound) || errors.Is(err, store.ErrClosed) {
			break
		}
		e.log.Warn("recording an outcome failed; retrying", "execution_id", ran.ID, "attempt", attempt, "err", err)
		time.Sleep(pause)
		pause *= 2
	}
	if err != nil {
		return nil, fmt.Errorf("engine: recording the outcome of %s: %w", ran.ID, err)
	}
	if madeEnd {
		ctx, cancel := storeCtx()
		defer cancel()
		e.ended(ctx, r)
	}
	return r, nil
}

// recordOutcome is one attempt of finish, with a deadline of its own. It
// reports whether ran is what made the record final: by this write, or by
// an earlier attempt whose write was stored although its reply was lost.
func (e *Service) recordOutcome(ran *Record) (*Record, bool, error) {
	ctx, cancel := storeCtx()
	defer cancel()
	if rev := ran.rev; rev != 0 {
		// ran comes from the running record this engine wrote at rev
		// (created running, or made running by execute): unless someone
		// wrote it since (a kill, a node taking over), the
		// outcome replaces it there, with no read first. Once: a conflict,
		// or a retry after an error, reads the record as below.
		ran.rev = 0
		err := e.update(ctx, ran, rev)
		if err == nil {
			return ran, true, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, false, err
		}
	}
	madeEnd := false
	r, _, err := e.transition(ctx, ran.ID, func(cur *Record) bool {
		switch {
		case !cur.Status.Final():
			cur.Execution, cur.Output = ran.Execution, ran.Output
			madeEnd = true
			return true
		case sameEnd(cur, ran):
			madeEnd = true
			return false
		case cur.Status == run.StatusKilled:
			merge(cur, ran)
			madeEnd = false
			return true
		}
		madeEnd = false
		return false
	})
	return r, madeEnd, err
}

// sameEnd reports whether cur holds the end that ran recorded.
func sameEnd(cur, ran *Record) bool {
	return cur.Status == ran.Status && cur.FinishedAt != nil && ran.FinishedAt != nil &&
		cur.FinishedAt.Equal(*ran.FinishedAt)
}

// endUnstarted records the end of an execution that never ran: stopped
// while it waited for a slot, or unrunnable. change sets the final fields.
func (e *Service) endUnstarted(id string, change func(*Record)) (*Record, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	r, ok, err := e.transition(sctx, id, func(r *Record) bool {
		if r.Status.Final() {
			return false
		}
		change(r)
		if r.FinishedAt == nil {
			r.FinishedAt = ptr(run.Now())
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("engine: recording the end of %s: %w", id, err)
	}
	if ok {
		e.ended(sctx, r)
	}
	return r, nil
}

// stoppedWaiting sets the final fields of an execution stopped before it
// started, according to the cause of its context.
func stoppedWaiting(cause error) func(*Record) {
	return func(r *Record) {
		switch {
		case errors.Is(cause, errShutdown):
			run.Fail(&r.Execution, run.ReasonNodeLost, msgNodeLost, run.ExitKilled)
		case errors.Is(cause, errKilled):
			markKilled(r, msgKilledQueued)
		default:
			markKilled(r, msgCallerGone)
		}
	}
}

// ended publishes the final status event and the audit record of an
// execution that just became final, and tells the OnFinish hook. The
// event's time is the record's finished_at, as a follower that finds the
// record final before the event would report it (follow.go). The event
// and the audit record go to different streams: both are written at once,
// and both are stored when ended returns.
func (e *Service) ended(ctx context.Context, r *Record) {
	at := run.Now()
	if r.FinishedAt != nil {
		at = *r.FinishedAt
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.appendAudit(ctx, r) })
	e.publishEventAt(ctx, r.ID, EventStatus, string(r.Status), at)
	wg.Wait()
	e.kickEviction()
	// One line per execution, for an operator reading the log.
	e.log.Info("execution", "id", r.ID, "status", r.Status, "reason", r.Reason, "exit_code", r.ExitCode,
		"duration_ms", r.DurationMs, "key", r.Audit.Caller)
	if e.deps.OnFinish != nil {
		e.deps.OnFinish(Finished{Execution: r.Execution, Owner: r.Owner(), OutputBytes: r.outputBytes()})
	}
}
