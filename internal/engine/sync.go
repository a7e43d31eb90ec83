package engine

import (
	"context"
	"fmt"
)

// RunSync runs req and returns its final record. It waits for a slot if
// all are busy and the queue has room; ErrOverloaded when it has none.
// Cancelling ctx kills the execution (it ends killed). Errors are
// ErrInvalid, ErrOverloaded, ErrClosed or a store failure.
func (e *Engine) RunSync(ctx context.Context, req Request) (*Execution, error) {
	p, err := e.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	t, err := e.adm.enterSync(req.Caller)
	if err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		t.abandon()
		return nil, err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	o, err := e.own(id, cancel)
	if err != nil {
		t.abandon()
		return nil, err
	}
	final := StatusFailed
	defer func() { o.release(final) }()

	r := newRecord(id, req, p, false)
	sctx, scancel := storeCtx()
	defer scancel()
	if err := e.create(sctx, r); err != nil {
		t.abandon()
		return nil, err
	}
	e.publishEvent(sctx, id, EventStatus, string(StatusPending))

	if err := t.wait(runCtx); err != nil {
		r, err := e.endUnstarted(id, stoppedWaiting(context.Cause(runCtx)))
		if err != nil {
			return nil, err
		}
		final = r.Status
		return &r.Execution, nil
	}
	defer t.release()
	r, err = e.execute(runCtx, o, p, func() {}, true)
	if err != nil {
		return nil, fmt.Errorf("engine: running %s: %w", id, err)
	}
	if r.Status == StatusPending {
		// The node shut down between the slot and the start.
		if r, err = e.endUnstarted(id, stoppedWaiting(context.Cause(runCtx))); err != nil {
			return nil, err
		}
	}
	final = r.Status
	return &r.Execution, nil
}
