package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// pingWait bounds how long recovery waits for an owner to answer.
const pingWait = 2 * time.Second

// Recover settles the executions a previous run left unfinished, before
// this node takes any work:
//
//   - A queued async job that never started is kept: it runs again when a
//     worker takes it, since running it cannot repeat any side effect. If
//     its queue message was lost (the node died between recording and
//     queueing it) it is queued again; a duplicate message is harmless,
//     because only one worker can move the record from pending to running.
//     On a single node (not Config.Fleet), a job a previous run took but
//     did not start is made available at once (it would come back only
//     after the queue's ack wait), and index entries of an earlier version
//     get the async flag the dispatcher looks for. In a fleet, taken jobs
//     may be live nodes' and are left to the ack wait.
//   - An execution another node runs (record.Node) is left alone while
//     that node is alive (its heartbeat is in the nodes bucket): the
//     other nodes watch it and settle its executions if it dies
//     (internal/engine/fleet, settle.go).
//   - Any other pending or running execution (one of a previous run of
//     this node, of a node that is gone, or of an older version that did
//     not record its node) is alive only if some node still owns it,
//     which its control subject tells. One that no node owns (on a single
//     node: all of them) is marked failed with reason node_lost; its
//     partial output, if any, was only in the live events.
func (e *Service) Recover(ctx context.Context) error {
	if !e.cfg.Fleet {
		if n, err := e.st.RequeueHeld(ctx); err != nil {
			return err
		} else if n > 0 {
			e.log.Info("re-queued jobs a previous run held", "count", n)
		}
	}
	queued, err := e.st.QueuedIDs(ctx)
	if err != nil {
		return err
	}
	inQueue := make(map[string]bool, len(queued))
	for _, id := range queued {
		inQueue[id] = true
	}
	for _, st := range []run.Status{run.StatusPending, run.StatusRunning} {
		opts := store.ListOptions{Limit: 100, Status: string(st), AllOwners: true, Match: unfinished}
		for {
			page, next, err := e.st.List(ctx, opts)
			if err != nil {
				return err
			}
			for _, ent := range page {
				if err := e.recoverOne(ctx, ent, inQueue); err != nil {
					return err
				}
			}
			if next == "" {
				break
			}
			opts.Cursor = next
		}
	}
	return nil
}

func (e *Service) recoverOne(ctx context.Context, ent store.Entry, inQueue map[string]bool) error {
	var r Record
	if err := json.Unmarshal(ent.Value, &r); err != nil {
		return fmt.Errorf("decoding record %s: %w", ent.Key, err)
	}
	if r.Async && r.Status == run.StatusPending {
		if !e.cfg.Fleet {
			// Nothing else writes while a single node starts.
			if err := e.st.SetMeta(ctx, r.ID, r.meta()); err != nil {
				return err
			}
		}
		if inQueue[r.ID] {
			return nil
		}
		e.log.Info("re-queueing an execution whose job was lost", "execution_id", r.ID)
		return e.st.Enqueue(ctx, r.Owner(), r.ID)
	}
	if r.Node != "" && r.Node != e.cfg.Node && e.deps.Alive(r.Node) {
		return nil
	}
	if owned, err := e.ownedAnywhere(ctx, r.ID); err != nil || owned {
		return err
	}
	run.Fail(&r.Execution, run.ReasonNodeLost, msgNodeLost, run.ExitKilled)
	r.FinishedAt = ptr(run.Now())
	err := e.update(ctx, &r, ent.Revision)
	if errors.Is(err, store.ErrConflict) {
		return nil // changed meanwhile: whoever changed it owns it
	}
	if err != nil {
		return err
	}
	e.log.Warn("execution lost with its node", "execution_id", r.ID)
	e.ended(ctx, &r)
	return nil
}

// ownedAnywhere reports whether some live node answers for an execution.
func (e *Service) ownedAnywhere(ctx context.Context, id string) (bool, error) {
	msg, err := json.Marshal(controlMsg{Op: opPing})
	if err != nil {
		return false, fmt.Errorf("encoding ping: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err = e.st.SendControl(pctx, id, msg)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNoOwner):
		return false, nil
	}
	return false, fmt.Errorf("asking for the owner of %s: %w", id, err)
}

// unfinished matches records that are pending or running.
func unfinished(value []byte) bool {
	var s struct {
		Status run.Status `json:"status"`
	}
	return json.Unmarshal(value, &s) == nil && !s.Status.Final()
}
