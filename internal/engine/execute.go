package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// storeTimeout bounds each store write of an execution's lifecycle. Those
// writes use their own context: a killed or abandoned execution must still
// be recorded.
const storeTimeout = 30 * time.Second

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// execute runs a pending execution that o owns: it marks it running, runs
// the jail with live output events, and records the outcome. ctx is the
// execution's context; cancelling it (with a cause, see outcome.go) stops
// the payload. onRunning is called once the record says running. The
// returned record is the final one as stored.
func (e *Engine) execute(ctx context.Context, o *owner, p *plan, onRunning func()) (*record, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	started := now()
	r, ok, err := e.transition(sctx, o.id, func(r *record) bool {
		if r.Status != StatusPending {
			return false
		}
		r.Status, r.StartedAt = StatusRunning, &started
		return true
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return r, nil // killed before it started; whoever did recorded it
	}
	o.running.Store(true)
	onRunning()
	e.publishEvent(sctx, o.id, EventStatus, string(StatusRunning))

	published := newPublishedOutput()
	out := newOutputEvents(e.cfg.FlushInterval, e.cfg.FlushBytes, func(t EventType, d string) {
		published.publish(sctx, e, o.id, t, d)
	})
	spec, release, done := e.enterEnv(ctx, sctx, o.id, p, r)
	if done != nil {
		out.close()
		fctx, fcancel := storeCtx() // the install may have outlasted sctx
		defer fcancel()
		return e.finish(fctx, done)
	}
	res, runErr := e.deps.Runner.Run(ctx, spec, e.liveOutputs(out.write, func(t EventType, d string) {
		e.publishEvent(sctx, o.id, t, d)
	}))
	release()
	out.close()

	ran := *r
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	e.outcome(&ran, p, res, runErr, cause)
	published.settle(&ran)
	// The run may have outlasted sctx: the outcome gets a deadline of its own.
	fctx, fcancel := storeCtx()
	defer fcancel()
	ran.Files, ran.FilesOmitted = e.saveFiles(fctx, o.id, res.Files), res.FilesOmitted
	return e.finish(fctx, &ran)
}

// finish stores the outcome of a run. A record that someone else already
// made final keeps its status: a kill is never overwritten by a late
// completion, but the run's output is added to it.
func (e *Engine) finish(ctx context.Context, ran *record) (*record, error) {
	wasFinal := false
	r, _, err := e.transition(ctx, ran.ID, func(cur *record) bool {
		wasFinal = cur.Status.Final()
		switch {
		case !wasFinal:
			cur.Execution, cur.Output = ran.Execution, ran.Output
			return true
		case cur.Status == StatusKilled:
			merge(cur, ran)
			return true
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("engine: recording the outcome of %s: %w", ran.ID, err)
	}
	if err := e.withOutput(ctx, r); err != nil {
		return nil, err
	}
	if !wasFinal {
		e.ended(ctx, r)
	}
	return r, nil
}

// endUnstarted records the end of an execution that never ran: stopped
// while it waited for a slot, or unrunnable. change sets the final fields.
func (e *Engine) endUnstarted(id string, change func(*record)) (*record, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	r, ok, err := e.transition(sctx, id, func(r *record) bool {
		if r.Status.Final() {
			return false
		}
		change(r)
		if r.FinishedAt == nil {
			r.FinishedAt = ptr(now())
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
func stoppedWaiting(cause error) func(*record) {
	return func(r *record) {
		switch {
		case errors.Is(cause, errShutdown):
			fail(r, ReasonNodeLost, msgNodeLost, exitKilled)
		case errors.Is(cause, errKilled):
			markKilled(r, msgKilledQueued)
		default:
			markKilled(r, msgCallerGone)
		}
	}
}

// ended publishes the final status event and the audit record of an
// execution that just became final, and tells the OnFinish hook.
func (e *Engine) ended(ctx context.Context, r *record) {
	e.publishEvent(ctx, r.ID, EventStatus, string(r.Status))
	e.appendAudit(ctx, r)
	e.kickEviction()
	if e.deps.OnFinish != nil {
		e.deps.OnFinish(r.Execution)
	}
}
