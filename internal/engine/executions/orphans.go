package executions

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// msgOrphaned is the error of an execution settled by the orphan sweep.
const msgOrphaned = "the node running this execution lost the store's answers while it started or ended it, and nothing ran it to its end"

// A node owns an execution (own) from before its record says running
// until after its final write. A record that says running on this node,
// or pending there (a sync execution waiting in line), while no execution
// of this node owns it has no one to finish it. It happens when the store
// lost a reply but not the write: a start or a creation stored although
// it timed out, and the write that would have undone it (abandonStart)
// failed too; or an outcome that four attempts could not record (finish).
// Recovery settles such a record when this node restarts, and the fleet
// when this node dies; the orphan sweep settles it while this node runs.

// orphanLoop sweeps this node's records every Config.OrphanSweep until
// ctx ends.
func (e *Service) orphanLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.OrphanSweep)
	defer t.Stop()
	var seen map[string]uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seen = e.sweepOrphans(ctx, seen)
	}
}

// sweepOrphans lists the unfinished records of this node that it does not
// own, and returns them (id: revision). One that the previous sweep found
// so too, at the same revision (nothing wrote it in between), is settled
// failed, node_lost, unless some node answers for it. The records whose
// creation was not confirmed (undoCreate) are read by id (they may have no index
// entry); one still not found at the next sweep was never stored.
func (e *Service) sweepOrphans(ctx context.Context, before map[string]uint64) map[string]uint64 {
	found := make(map[string]uint64)
	consider := func(ent store.Entry) {
		if e.ownsHere(ent.Key) {
			return
		}
		if rev, ok := before[ent.Key]; ok && rev == ent.Revision {
			if !e.settleOrphan(ctx, ent) {
				found[ent.Key] = ent.Revision // try again at the next sweep
			}
			return
		}
		found[ent.Key] = ent.Revision
	}
	mine := unfinishedOn(e.cfg.Node)
	for _, id := range e.unconfirmedIDs() {
		gctx, cancel := context.WithTimeout(ctx, storeTimeout)
		ent, err := e.st.Get(gctx, id)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			if rev, ok := before[id]; ok && rev == 0 {
				e.confirmed(id) // not found twice: never stored
			} else {
				found[id] = 0 // no revision is 0
			}
		case err != nil:
			if rev, ok := before[id]; ok {
				found[id] = rev
			}
		case !mine(ent.Value):
			e.confirmed(id) // final, or not this node's to settle
		default:
			consider(ent)
		}
	}
	for _, st := range []run.Status{run.StatusPending, run.StatusRunning} {
		opts := store.ListOptions{Limit: 100, Status: string(st), AllOwners: true, Match: unfinishedOn(e.cfg.Node)}
		for {
			lctx, cancel := context.WithTimeout(ctx, storeTimeout)
			page, next, err := e.st.List(lctx, opts)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					e.log.Warn("listing this node's executions for owners", "err", err)
				}
				return before // this round found nothing it can trust
			}
			for _, ent := range page {
				if _, seen := found[ent.Key]; !seen {
					consider(ent)
				}
			}
			if next == "" {
				break
			}
			opts.Cursor = next
		}
	}
	return found
}

// undoCreate ends, as not run, the record of a creation that failed (it
// may have been stored all the same; started is the start it was created
// with, zero for a pending one). One it cannot end is remembered for the
// orphan sweep to read by id.
func (e *Service) undoCreate(id string, started time.Time) {
	if e.abandonStart(id, started, notStarted) != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unconfirmed[id] = true
}

// confirmed forgets an id undoCreate remembered.
func (e *Service) confirmed(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.unconfirmed, id)
}

// unconfirmedIDs lists the ids undoCreate remembered.
func (e *Service) unconfirmedIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.unconfirmed))
	for id := range e.unconfirmed {
		ids = append(ids, id)
	}
	return ids
}

// ownsHere reports whether an execution of this node owns id.
func (e *Service) ownsHere(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.owned[id]
	return ok
}

// settleOrphan marks failed, node_lost, the record ent holds, if it is
// still at ent's revision and no node (of any name) answers for it. It
// reports whether it is done with the record: false to look again at the
// next sweep (the store or the ping failed).
func (e *Service) settleOrphan(ctx context.Context, ent store.Entry) bool {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	owned, err := e.ownedAnywhere(sctx, ent.Key)
	if err != nil {
		e.log.Warn("asking for the owner of an execution", "execution_id", ent.Key, "err", err)
		return false
	}
	if owned {
		return true
	}
	var r Record
	if err := json.Unmarshal(ent.Value, &r); err != nil {
		e.log.Warn("decoding an execution without owner", "execution_id", ent.Key, "err", err)
		return true
	}
	was := r.Status
	run.Fail(&r.Execution, run.ReasonNodeLost, msgOrphaned, run.ExitKilled)
	r.FinishedAt = ptr(run.Now())
	err = e.update(sctx, &r, ent.Revision)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return true // written or gone meanwhile: whoever wrote it owns it
	}
	if err != nil {
		e.log.Warn("settling an execution without owner", "execution_id", ent.Key, "err", err)
		return false
	}
	e.confirmed(ent.Key)
	e.log.Warn("execution without owner settled", "execution_id", ent.Key, "status_was", was)
	e.ended(sctx, &r)
	return true
}
