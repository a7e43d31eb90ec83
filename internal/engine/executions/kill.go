package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// Kill stops an execution wherever it runs. It returns run.StatusKilled if the
// execution was pending or running and is now killed, else its current
// status (a finished execution stays as it is).
//
// The node that owns the execution (runs it, or holds it in line) is asked
// over the control subject and answers once the outcome is recorded. When
// no node owns it (a queued async job, or an execution whose node died),
// Kill marks the record killed itself, with a compare-and-set against the
// revision it read before asking: if a worker took the job meanwhile, the
// write fails and Kill asks again.
//
// ErrNotFound when the execution does not exist.
func (e *Service) Kill(ctx context.Context, id string) (run.Status, error) {
	msg, err := json.Marshal(controlMsg{Op: opKill})
	if err != nil {
		return "", fmt.Errorf("engine: encoding kill: %w", err)
	}
	for {
		r, rev, err := e.load(ctx, id)
		if err != nil {
			return "", err
		}
		if r.Status.Final() {
			return r.Status, nil
		}
		kctx, cancel := context.WithTimeout(ctx, e.cfg.KillWait+storeTimeout)
		reply, err := e.st.SendControl(kctx, id, msg)
		cancel()
		switch {
		case err == nil:
			var rep controlReply
			if err := json.Unmarshal(reply, &rep); err != nil {
				return "", fmt.Errorf("engine: decoding kill reply for %s: %w", id, err)
			}
			if rep.Status != "" {
				return rep.Status, nil
			}
			// The owner is still stopping it: report what is recorded.
			r, _, err := e.load(ctx, id)
			if err != nil {
				return "", err
			}
			return r.Status, nil
		case !errors.Is(err, store.ErrNoOwner):
			return "", fmt.Errorf("engine: killing %s: %w", id, err)
		}
		if r.Status == run.StatusPending {
			markKilled(r, msgKilledQueued)
		} else {
			markKilled(r, msgKilled)
		}
		err = e.update(ctx, r, rev)
		if errors.Is(err, store.ErrConflict) {
			continue // taken or changed meanwhile: look again
		}
		if err != nil {
			return "", err
		}
		e.ended(ctx, r)
		if r.Async {
			e.dropRequest(id)
			if err := e.st.DropJob(ctx, r.Owner(), id); err != nil {
				// The dispatcher acks it when it serves the key again.
				e.log.Warn("removing a killed job from the queue", "execution_id", id, "err", err)
			}
		}
		return run.StatusKilled, nil
	}
}
