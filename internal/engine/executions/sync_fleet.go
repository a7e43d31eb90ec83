package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// runQueued runs a sync request that cannot start on this node now (no
// free slot, or its caller at its running limit) through the fleet's
// queue, like an async job: whichever node frees a slot first, this one
// included, runs it in its caller's turn, and this call waits for the
// final record. The answer is what a local run returns. Cancelling ctx
// stops the execution as it would stop a local one: killed before it
// starts (the caller went away), or killed wherever it runs.
func (e *Service) runQueued(ctx context.Context, req run.Request, p *run.Plan) (*run.Execution, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	if err := e.slots.ReserveAsync(req.Caller, id); err != nil {
		return nil, err
	}
	if err := e.enqueue(ctx, id, req, p); err != nil {
		return nil, err
	}
	r, err := e.awaitFinal(ctx, id)
	if err != nil && ctx.Err() != nil {
		r, err = e.stopQueued(id, context.Cause(ctx))
	}
	if err != nil {
		return nil, err
	}
	return &r.Execution, nil
}

// awaitFinal waits until execution id has a final record and returns it
// with its output. It follows the execution's events for the final status
// and checks the record whenever they are silent for followIdle (a node
// that died between the record and the event).
func (e *Service) awaitFinal(ctx context.Context, id string) (*Record, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, err := e.st.FollowEvents(fctx, id)
	if err != nil {
		return nil, fmt.Errorf("engine: following %s: %w", id, err)
	}
	idle := time.NewTimer(followIdle)
	defer idle.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return e.finalRecord(id, true)
			}
			var se storedEvent
			if json.Unmarshal(m.Data, &se) == nil && se.Type == EventStatus && run.Status(se.Data).Final() {
				return e.finalRecord(id, true)
			}
		case <-idle.C:
			r, err := e.finalRecord(id, false)
			if err == nil || !errors.Is(err, errNotFinal) {
				return r, err
			}
			idle.Reset(followIdle)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// errNotFinal is finalRecord's answer for an execution still going.
var errNotFinal = errors.New("the execution has not ended")

// finalRecord loads the record of id with its output; errNotFinal when
// it is not final yet. must says the record has to be final by now.
func (e *Service) finalRecord(id string, must bool) (*Record, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	r, _, err := e.load(sctx, id)
	if err != nil {
		return nil, err
	}
	if !r.Status.Final() {
		if must {
			return nil, fmt.Errorf("engine: %s is %s after its final event: %w", id, r.Status, errNotFinal)
		}
		return nil, errNotFinal
	}
	if err := e.WithOutput(sctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// stopQueued stops a queued sync execution whose caller went away: a
// pending one ends as a local one stopped while waiting would; one that
// started is killed wherever it runs. It returns the final record.
func (e *Service) stopQueued(id string, cause error) (*Record, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	r, ok, err := e.transition(sctx, id, func(r *Record) bool {
		if r.Status != run.StatusPending {
			return false
		}
		stoppedWaiting(cause)(r)
		r.FinishedAt = ptr(run.Now())
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("engine: stopping %s: %w", id, err)
	}
	if ok {
		e.ended(sctx, r)
		e.dropRequest(id)
		if err := e.st.DropJob(sctx, r.Owner(), id); err != nil {
			e.log.Warn("removing a stopped job from the queue", "execution_id", id, "err", err)
		}
		return r, nil
	}
	if !r.Status.Final() {
		kctx, kcancel := context.WithTimeout(context.Background(), e.cfg.KillWait+storeTimeout)
		defer kcancel()
		if _, err := e.Kill(kctx, id); err != nil {
			return nil, err
		}
	}
	return e.finalRecord(id, true)
}
