package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/store"
)

const (
	// fetchWait is how long one queue fetch waits for a job.
	fetchWait = time.Second
	// holdTick is how often a worker holding a job it cannot start yet
	// tells the queue it is still on it (well within the ack wait).
	holdTick = 5 * time.Second
	// retryPause follows a failed queue fetch.
	retryPause = time.Second
)

// Submit admits req as an async execution and returns its id once the job
// is durably queued. Errors are ErrInvalid, ErrOverloaded, ErrClosed or a
// store failure.
func (e *Engine) Submit(ctx context.Context, req Request) (string, error) {
	p, err := e.prepare(ctx, req)
	if err != nil {
		return "", err
	}
	if err := e.adm.reserveAsync(req.Caller); err != nil {
		return "", err
	}
	id, err := e.enqueue(ctx, req, p)
	if err != nil {
		e.adm.unreserveAsync(req.Caller)
		return "", err
	}
	return id, nil
}

// enqueue stores the request and the pending record, then queues the job.
func (e *Engine) enqueue(ctx context.Context, req Request, p *plan) (string, error) {
	id, err := newID()
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("engine: encoding request: %w", err)
	}
	if err := e.st.PutRequest(ctx, id, body); err != nil {
		return "", err
	}
	if err := e.create(ctx, newRecord(id, req, p, true)); err != nil {
		e.dropRequest(id)
		return "", err
	}
	e.publishEvent(ctx, id, EventStatus, string(StatusPending))
	if err := e.st.Enqueue(ctx, id); err != nil {
		if _, ferr := e.endUnstarted(id, func(r *record) {
			fail(r, ReasonSetupError, "the execution could not be queued", exitNoRun)
		}); ferr != nil {
			e.log.Error("recording a failed enqueue", "execution_id", id, "err", ferr)
		}
		e.dropRequest(id)
		return "", err
	}
	return id, nil
}

// dispatch takes jobs from the queue and puts each in its caller's line
// (see admission), until ctx ends. It holds at most as many jobs as the
// node admits, so every job here is held and served in turn. A job held
// but not started when ctx ends stays unacked, so the queue hands it out
// again.
func (e *Engine) dispatch(ctx context.Context) {
	for {
		if full := e.adm.room(); full != nil {
			select {
			case <-full:
				continue
			case <-ctx.Done():
				return
			}
		}
		job, err := e.st.NextJob(ctx, fetchWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			e.log.Error("taking a job from the queue", "err", err)
			select {
			case <-time.After(retryPause):
			case <-ctx.Done():
				return
			}
			continue
		}
		if job == nil {
			continue
		}
		t := e.adm.holdAsync(e.jobOwner(job.ID()))
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			err := t.waitAsync(ctx, holdTick, func() {
				if err := job.InProgress(); err != nil {
					e.log.Warn("extending a held job", "execution_id", job.ID(), "err", err)
				}
			})
			if err != nil {
				return
			}
			defer t.release()
			e.runJob(job)
		}()
	}
}

// jobOwner is the caller whose line a queued job waits in. A job whose
// record cannot be read waits in the line of the empty caller; runJob
// then decides what becomes of it.
func (e *Engine) jobOwner(id string) string {
	sctx, cancel := storeCtx()
	defer cancel()
	r, _, err := e.load(sctx, id)
	if err != nil {
		return ""
	}
	return r.Owner()
}

// runJob runs one job taken from the queue. The job is acked once the
// record says running: from then on the record, not the queue, owns the
// execution, and a node that dies mid-run leaves it to recovery
// (node_lost) rather than running user code twice.
func (e *Engine) runJob(job store.Job) {
	id := job.ID()
	sctx, cancel := storeCtx()
	defer cancel()
	ack := func() {
		if err := job.Ack(sctx); err != nil {
			e.log.Warn("acking job", "execution_id", id, "err", err)
		}
	}
	r, _, err := e.load(sctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		ack() // expired or never recorded: nothing to run
		return
	case err != nil:
		e.log.Error("loading a queued execution", "execution_id", id, "err", err)
		return // not acked: the queue hands it out again
	case r.Status != StatusPending:
		ack() // killed while queued, or a duplicate job
		return
	}

	runCtx, cancelRun := context.WithCancelCause(e.base)
	defer cancelRun(nil)
	o, err := e.own(id, cancelRun)
	if err != nil {
		return // shutting down: leave it queued
	}
	final := StatusFailed
	defer func() { o.release(final) }()
	defer func() {
		// A job left pending (this node shut down before it started) runs
		// on another node, which needs the request.
		if final != StatusPending {
			e.dropRequest(id)
		}
	}()

	p, err := e.loadPlan(sctx, id)
	if err != nil {
		r, ferr := e.endUnstarted(id, func(r *record) { fail(r, ReasonSetupError, err.Error(), exitNoRun) })
		if ferr != nil {
			e.log.Error("recording an unrunnable job", "execution_id", id, "err", ferr)
			return
		}
		final = r.Status
		ack()
		return
	}
	r, err = e.execute(runCtx, o, p, ack, false)
	if err != nil {
		e.log.Error("running a queued execution", "execution_id", id, "err", err)
		return
	}
	final = r.Status
	if r.Status.Final() && r.StartedAt == nil {
		ack() // killed while we were claiming it
	}
	// Still pending: this node shut down before it started. Not acked,
	// the job goes to another node after the ack wait.
}

// loadPlan reads a queued request back and prepares it again (the
// interpreter may have gone since it was submitted).
func (e *Engine) loadPlan(ctx context.Context, id string) (*plan, error) {
	body, err := e.st.GetRequest(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the queued request is gone: %w", err)
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("the queued request is unreadable: %w", err)
	}
	p, err := e.prepare(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("the queued request can no longer run: %w", err)
	}
	return p, nil
}

// dropRequest deletes a stored request payload; it expires with the TTL
// anyway, so a failure is only logged.
func (e *Engine) dropRequest(id string) {
	sctx, cancel := storeCtx()
	defer cancel()
	if err := e.st.DeleteRequest(sctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("deleting a request payload", "execution_id", id, "err", err)
	}
}
