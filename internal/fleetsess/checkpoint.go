package fleetsess

import (
	"context"
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// Checkpoints in the registry. A node records the latest checkpoint of
// each of its sessions (SessionCheckpointed) and, in the background, how
// many cells each session that has one ran (SessionCells: one write per
// session at a time, coalesced, never before a cell's answer). When the
// node is lost, a session with a checkpoint is not ended: its entry is
// parked on its checkpoint (lose), naming the cells run after it, and
// the next call on any node takes it over (takeover.go) and reports
// restored_from on its first cell.

// SessionCheckpointed records checkpoint c of a session of this node
// (engine Deps.OnSessionCheckpoint); one without a snapshot says the
// session has none any more (restarted: its count of cells starts again).
// An error (the write failed, or this run no longer holds the session:
// errNotHeld) tells the engine to delete the new checkpoint and keep the
// one the entry names; otherwise it deletes the one replaced.
func (r *Router) SessionCheckpointed(c engine.SessionCheckpoint) error {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	err := r.updateOwn(ctx, c.ID, func(e *store.SessionEntry) bool {
		if c.Snapshot == "" {
			e.Checkpoint, e.CheckpointCells, e.Cells = "", 0, 0
			return true
		}
		e.Checkpoint, e.CheckpointCells, e.Cells = c.Snapshot, c.Cells, max(e.Cells, c.Cells)
		return true
	})
	if err != nil {
		r.log.Warn("recording a session's checkpoint", "session_id", c.ID, "snapshot_id", c.Snapshot, "err", err)
	}
	return err
}

// SessionCells notes that session id of this node ran cells cells
// (engine Deps.OnSessionCell); a worker writes it to the registry.
func (r *Router) SessionCells(id string, cells int) {
	r.mu.Lock()
	r.cells[id] = max(r.cells[id], cells)
	r.mu.Unlock()
	select {
	case r.cellsDirty <- struct{}{}:
	default:
	}
}

// writeCells writes the noted counts of cells until Close.
func (r *Router) writeCells() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.cellsDirty:
		}
		r.mu.Lock()
		todo := r.cells
		r.cells = map[string]int{}
		r.mu.Unlock()
		for id, n := range todo {
			ctx, cancel := context.WithTimeout(r.ctx, registryTimeout)
			err := r.updateOwn(ctx, id, func(e *store.SessionEntry) bool {
				if e.Cells >= n {
					return false
				}
				e.Cells = n
				return true
			})
			cancel()
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, errNotHeld) && r.ctx.Err() == nil {
				r.log.Warn("recording a session's count of cells", "session_id", id, "err", err)
			}
		}
	}
}

// errNotHeld: the entry is no longer this run's to write (it ended, was
// parked for another node to resume, or another run holds it).
var errNotHeld = errors.New("this node no longer holds the session")

// updateOwn applies change to the live entry of id while this run holds
// it, under compare-and-set; change says whether to write. The entry is
// this run's only if it names this node and this run's token (Holder),
// and is neither ended nor parked (a parked entry, by a shutdown or
// because the fleet declared this node lost, is for whichever node
// resumes it): else errNotHeld, and nothing is written.
func (r *Router) updateOwn(ctx context.Context, id string, change func(*store.SessionEntry) bool) error {
	for {
		e, rev, err := r.cfg.Registry.GetSession(ctx, id)
		if err != nil {
			return err
		}
		if e.Node != r.cfg.Node || e.Holder != r.instance || e.Ended != "" || e.Hibernation != "" || e.FromCheckpoint {
			return errNotHeld
		}
		if !change(&e) {
			return nil
		}
		err = r.cfg.Registry.UpdateSession(ctx, e, rev)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// lose settles session id, whose node is lost: parked on its checkpoint
// if it has one (reported by errMoved: ask the registry again), else ended
// node_lost (its endedError). An entry ended or parked already, or one
// that no longer names node (or, when holder is set, that run of it), is
// left as it is (errMoved).
func (r *Router) lose(ctx context.Context, id, node, holder string) error {
	for {
		e, rev, err := r.cfg.Registry.GetSession(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return notFound(id)
		case err != nil:
			return err
		case e.Ended != "":
			return &endedError{id: id, reason: e.Ended}
		case parked(e, time.Now()), e.Node != node, holder != "" && e.Holder != holder:
			return errMoved
		}
		restorable := fromCheckpoint(&e, time.Now())
		if !restorable {
			e.Ended = ReasonNodeLost
		}
		err = r.cfg.Registry.UpdateSession(ctx, e, rev)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case err != nil:
			return err
		case restorable:
			r.log.Warn("session of a lost node: it resumes from its checkpoint", "session_id", id, "node", e.Node,
				"snapshot_id", e.Hibernation, "cells_lost", e.CellsLost)
			return errMoved
		}
		r.log.Warn("session ended: its node is lost", "session_id", id, "node", e.Node)
		return &endedError{id: id, reason: ReasonNodeLost}
	}
}

// fromCheckpoint parks entry e of a lost node on its checkpoint, as of
// now, and says whether it had one. A checkpoint past the session's
// lifetime is none.
func fromCheckpoint(e *store.SessionEntry, now time.Time) bool {
	if e.Checkpoint == "" || (!e.ExpiresAt.IsZero() && !now.Before(e.ExpiresAt)) {
		return false
	}
	e.Hibernation, e.ParkedAt, e.TakenAt = e.Checkpoint, now, time.Time{}
	e.FromCheckpoint, e.CellsLost = true, max(0, e.Cells-e.CheckpointCells)
	return true
}
