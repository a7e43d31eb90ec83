package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/store"
)

const (
	// retryPause follows a failed queue fetch.
	retryPause = time.Second
	// Empty fetches of callers the index says have queued jobs (a job
	// recorded but not yet published, or taken by another node that has
	// not started it) are retried after a pause that doubles from
	// firstRetry up to lastRetry. Anything that changes the index or this
	// node's slots wakes the dispatcher sooner.
	firstRetry = 20 * time.Millisecond
	lastRetry  = time.Second
)

// Submit admits req as an async execution and returns its id once the job
// is durably queued. Errors are ErrInvalid, ErrOverloaded, ErrClosed or a
// store failure.
func (e *Service) Submit(ctx context.Context, req run.Request) (string, error) {
	p, err := e.planner.Prepare(ctx, req)
	if err != nil {
		return "", err
	}
	id, err := newID()
	if err != nil {
		return "", err
	}
	if err := e.slots.ReserveAsync(req.Caller, id); err != nil {
		return "", err
	}
	if err := e.enqueue(ctx, id, req, p); err != nil {
		return "", err
	}
	return id, nil
}

// enqueue stores the request and the pending record of job id, then
// queues it. The caller reserved its place (admission.Gate.ReserveAsync),
// which counts it until the index holds its record; enqueue ends the
// reservation on its way out.
func (e *Service) enqueue(ctx context.Context, id string, req run.Request, p *run.Plan) error {
	defer e.slots.Submitted(req.Caller, id)
	body, err := json.Marshal(queuedRequest{Request: req, Detected: p.Env.Analysis})
	if err != nil {
		return fmt.Errorf("engine: encoding request: %w", err)
	}
	if err := e.st.PutRequest(ctx, id, body); err != nil {
		return err
	}
	if err := e.create(ctx, newRecord(id, req, p, true)); err != nil {
		e.dropRequest(id)
		return err
	}
	e.publishEvent(ctx, id, EventStatus, string(run.StatusPending))
	if err := e.st.Enqueue(ctx, req.Caller, id); err != nil {
		if _, ferr := e.endUnstarted(id, func(r *Record) {
			run.Fail(&r.Execution, run.ReasonSetupError, "the execution could not be queued", run.ExitNoRun)
		}); ferr != nil {
			e.log.Error("recording a failed enqueue", "execution_id", id, "err", ferr)
		}
		e.dropRequest(id)
		return err
	}
	e.slots.Queued()
	return nil
}

// dispatch runs queued jobs until ctx ends. Whenever this node has a
// free slot (see admission.Gate.Claim) it takes one job, from the first caller
// in turn that has one available; an empty fetch moves on to the next
// caller. It never takes a job it cannot start at once, so the fleet's
// queued jobs go to nodes with free slots. With no slot, or no job to
// take, it sleeps until the index or this node's slots change.
func (e *Service) dispatch(ctx context.Context) {
	retry := firstRetry
	for {
		indexChanged := e.st.IndexChanged()
		keys, slotsChanged := e.slots.Claim()
		var pause <-chan time.Time
		if len(keys) > 0 {
			took, err := e.takeOne(ctx, keys)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				e.log.Error("taking a job from the queue", "err", err)
				pause = time.After(retryPause)
			case took:
				retry = firstRetry
				continue
			default:
				pause = time.After(retry)
				retry = min(2*retry, lastRetry)
			}
		}
		e.slots.Poke()
		select {
		case <-indexChanged:
		case <-slotsChanged:
		case <-pause:
		case <-ctx.Done():
			return
		}
	}
}

// takeOne takes a job of the first of keys that has one available for
// the slot just claimed and starts it, or gives the slot back.
func (e *Service) takeOne(ctx context.Context, keys []string) (took bool, err error) {
	for _, key := range keys {
		job, err := e.st.TakeJob(ctx, key)
		if err != nil {
			e.slots.Unclaim()
			return false, err
		}
		if job == nil {
			continue
		}
		if ctx.Err() != nil {
			e.nak(job)
			break
		}
		t := e.slots.StartAsync(key)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.runJob(job, t)
		}()
		return true, nil
	}
	e.slots.Unclaim()
	return false, nil
}

// nak hands a job this node took back to the queue at once, for another
// node (or this one, later) to run.
func (e *Service) nak(job store.Job) {
	if err := job.Nak(); err != nil {
		e.log.Warn("handing back a job", "execution_id", job.ID(), "err", err)
	}
}

// runJob runs one job taken from the queue. The job is acked once the
// record says running, or final without having run (killed first, or its
// start never confirmed): from then on the record, not the queue, owns
// the execution, and a node that dies mid-run leaves it to recovery
// (node_lost) rather than running user code twice.
// t's slot is given back right before the outcome is recorded
// (owner.endRun), or on the way out when it never ran.
func (e *Service) runJob(job store.Job, t *admission.Ticket) {
	freeSlot := slotFree(t)
	defer freeSlot()
	id := job.ID()
	sctx, cancel := storeCtx()
	defer cancel()
	ack := func() {
		// Its own deadline: the start may have taken sctx's time.
		actx, cancel := storeCtx()
		defer cancel()
		if err := job.Ack(actx); err != nil {
			e.log.Warn("acking job", "execution_id", id, "err", err)
		}
	}
	r, _, err := e.load(sctx, id)
	switch {
	case errors.Is(err, run.ErrNotFound):
		ack() // expired or never recorded: nothing to run
		return
	case err != nil:
		e.log.Error("loading a queued execution", "execution_id", id, "err", err)
		e.nak(job) // the queue hands it out again
		return
	case r.Status != run.StatusPending:
		ack() // killed while queued, or a duplicate job
		return
	}

	runCtx, cancelRun := context.WithCancelCause(e.base)
	defer cancelRun(nil)
	o, err := e.own(id, cancelRun)
	if errors.Is(err, errOwnedHere) {
		// The job came back while this node still starts it (its start
		// write is being retried): left to that run; unacked, it comes
		// back after the ack wait if that run does not ack it.
		return
	}
	if err != nil {
		e.nak(job) // shutting down: another node takes it now
		return
	}
	o.freeSlot = freeSlot
	var final run.Status // unknown until recorded: a kill then reads the record
	defer func() {
		freeSlot() // before a kill waiting on the owner is answered
		o.release(final)
	}()
	defer func() {
		// A job that may still be pending (this node shut down before it
		// started, or its start failed) runs later, here or on another
		// node, which needs the request; one running on another node is
		// that node's to drop.
		if final.Final() {
			e.dropRequest(id)
		}
	}()

	p, err := e.loadPlan(sctx, id)
	if err != nil {
		r, ferr := e.endUnstarted(id, func(r *Record) { run.Fail(&r.Execution, run.ReasonSetupError, err.Error(), run.ExitNoRun) })
		if ferr != nil {
			e.log.Error("recording an unrunnable job", "execution_id", id, "err", ferr)
			return
		}
		final = r.Status
		ack()
		return
	}
	r, err = e.execute(runCtx, o, p, nil, func() {
		t.Recorded() // the index stops counting it as queued
		ack()
	}, false)
	if err != nil {
		e.log.Error("running a queued execution", "execution_id", id, "err", err)
		return
	}
	final = r.Status
	switch {
	case r.Status.Final() && !o.started():
		ack() // killed while we were claiming it, or its start never confirmed
	case r.Status == run.StatusPending:
		// This node shut down before it started: handed back, another
		// node takes it now.
		e.nak(job)
	}
}

// queuedRequest is a queued request as stored: the request, and the
// import analysis the submitting node made of it, so that the node that
// runs it (after a restart, another node) prepares it without running the
// detector again. Its fields are the request's at the top level, which a
// node of an earlier version reads as the request alone.
type queuedRequest struct {
	run.Request
	Detected *pyenv.Analysis `json:"detected,omitempty"`
}

// loadPlan reads a queued request back and prepares it again (the
// interpreter may have gone since it was submitted).
func (e *Service) loadPlan(ctx context.Context, id string) (*run.Plan, error) {
	body, err := e.st.GetRequest(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the queued request is gone: %w", err)
	}
	var q queuedRequest
	if err := json.Unmarshal(body, &q); err != nil {
		return nil, fmt.Errorf("the queued request is unreadable: %w", err)
	}
	e.planner.Remember(q.Request, q.Detected)
	p, err := e.planner.Prepare(ctx, q.Request)
	if err != nil {
		return nil, fmt.Errorf("the queued request can no longer run: %w", err)
	}
	return p, nil
}

// dropRequest deletes a stored request payload; it expires with the TTL
// anyway, so a failure is only logged.
func (e *Service) dropRequest(id string) {
	sctx, cancel := storeCtx()
	defer cancel()
	if err := e.st.DeleteRequest(sctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("deleting a request payload", "execution_id", id, "err", err)
	}
}
