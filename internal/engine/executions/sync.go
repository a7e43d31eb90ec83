package executions

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
)

// RunSync runs req and returns its final record. With a free slot it
// runs here at once. Without one it waits for a slot if the queue has
// room (ErrOverloaded when it has none): on a single node in its caller's
// line here, in a fleet (Config.Fleet) in the fleet's queue, so that any
// node with a free slot runs it (runQueued). Cancelling ctx kills the
// execution (it ends killed). Errors are ErrInvalid, ErrOverloaded,
// ErrClosed or a store failure.
func (e *Service) RunSync(ctx context.Context, req run.Request) (*run.Execution, error) {
	p, err := e.planner.Prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	var t *admission.Ticket
	if e.cfg.Fleet {
		if t, err = e.slots.TrySync(req.Caller); err == nil && t == nil {
			return e.runQueued(ctx, req, p)
		}
	} else {
		t, err = e.slots.EnterSync(req.Caller)
	}
	if err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		t.Abandon()
		return nil, err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	o, err := e.own(id, cancel)
	if err != nil {
		t.Abandon()
		return nil, err
	}
	final := run.StatusFailed
	defer func() { o.release(final) }()

	r := newRecord(id, req, p, false)
	r.Node = e.cfg.Node
	sctx, scancel := storeCtx()
	defer scancel()
	if t.Admitted() {
		o.freeSlot = slotFree(t)
		return e.runAdmitted(runCtx, sctx, o, p, r, &final)
	}
	if err := e.create(sctx, r); err != nil {
		t.Abandon()
		e.undoCreate(id, time.Time{}) // stored although unconfirmed, it must not stay pending
		return nil, err
	}
	e.publishEvent(sctx, id, EventStatus, string(run.StatusPending))

	if err := t.Wait(runCtx); err != nil {
		r, err := e.endUnstarted(id, stoppedWaiting(context.Cause(runCtx)))
		if err != nil {
			return nil, err
		}
		final = r.Status
		return &r.Execution, nil
	}
	o.freeSlot = slotFree(t)
	defer o.freeSlot()
	if req.Network {
		// While it waited the operator may have changed the secrets or
		// the HTTP rules (SIGHUP): it runs with those of now, as a queued
		// asynchronous request does (loadPlan), or not at all.
		if p, err = e.planner.Prepare(runCtx, req); err != nil {
			msg := "the queued request can no longer run: " + err.Error()
			r, err := e.endUnstarted(id, func(r *Record) { run.Fail(&r.Execution, run.ReasonSetupError, msg, run.ExitNoRun) })
			if err != nil {
				return nil, err
			}
			final = r.Status
			return &r.Execution, nil
		}
	}
	r, err = e.execute(runCtx, o, p, r, func() {}, true)
	if err != nil {
		return nil, fmt.Errorf("engine: running %s: %w", id, err)
	}
	if r.Status == run.StatusPending {
		// The node shut down between the slot and the start.
		if r, err = e.endUnstarted(id, stoppedWaiting(context.Cause(runCtx))); err != nil {
			return nil, err
		}
	}
	final = r.Status
	return &r.Execution, nil
}

// runAdmitted runs a synchronous execution that got its slot at once: its
// record is created running, which spares the compare-and-set that would
// turn a pending record running right after. Followers see the same status
// events as for any execution, pending then running, published together.
// final receives the status it ended with.
func (e *Service) runAdmitted(ctx, sctx context.Context, o *owner, p *run.Plan, r *Record, final *run.Status) (*run.Execution, error) {
	defer o.freeSlot()
	if !o.begin() {
		return nil, run.ErrClosed // Close came first: nothing was recorded
	}
	started := run.Now()
	r.Status, r.StartedAt, r.Node = run.StatusRunning, &started, e.cfg.Node
	// The status events go to their stream while the record is written (a
	// follower finds the execution through its record, so their order does
	// not show); both are stored before the run's first output event. If
	// the record cannot be written, its events are removed.
	var events sync.WaitGroup
	events.Go(func() {
		_ = e.publishEvents(sctx, r.ID, []Event{ // a failure is logged: events are the live view
			{Type: EventStatus, Data: string(run.StatusPending)},
			{Type: EventStatus, Data: string(run.StatusRunning)},
		})
	})
	err := e.create(sctx, r)
	if err == nil {
		o.running.Store(true)
	}
	events.Wait()
	if err != nil {
		e.purgeEvents(r.ID)
		// The record may have been stored although the reply was lost:
		// it must not stay running with no one to finish it.
		e.undoCreate(r.ID, started)
		return nil, err
	}
	r, err = e.run(ctx, sctx, o, p, r, true)
	if err != nil {
		return nil, fmt.Errorf("engine: running %s: %w", o.id, err)
	}
	*final = r.Status
	return &r.Execution, nil
}

// purgeEvents removes the events of an execution whose record could not
// be created (a failure is logged: they belong to nothing a follower can
// find).
func (e *Service) purgeEvents(id string) {
	ctx, cancel := storeCtx()
	defer cancel()
	if err := e.st.PurgeEvents(ctx, id); err != nil {
		e.log.Warn("removing the events of an execution not recorded", "execution_id", id, "err", err)
	}
}
