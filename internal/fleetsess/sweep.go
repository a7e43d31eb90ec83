package fleetsess

import (
	"context"
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// The sweep: a hibernation snapshot is the server's, kept in the fleet's
// store while a session needs it, and counted against its key's
// hibernation quota. Some outlive their session: a node killed while its
// sessions hibernated, a node whose graceful shutdown parked sessions and
// that never starts again under its name, an entry marked lost while it
// was parked, a save cut short after its object was stored. Every node
// sweeps them, from the registry: a parked session whose node did not
// take it back within ParkedFor (or its lifetime) ends as node_lost; then
// a hibernation snapshot is deleted when its session's entry ended while
// naming it, or, once older than OrphanAge (past any save or resume in
// flight), when no live entry of its owner names its session, or its
// session lives on this node without hibernating in it. A snapshot of a
// session another node holds is that node's to sweep.

// sweeps runs the sweep at start (after the adoption of the parked
// sessions) and every SweepEvery, until Close, each time after trying
// again to adopt this node's parked sessions that could not be read.
func (r *Router) sweeps() {
	t := time.NewTicker(r.cfg.SweepEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.SweepEvery)
		r.adoptParked(ctx) // those whose snapshot could not be read at start
		r.sweep(ctx, time.Now())
		cancel()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep ends the parked sessions whose node will not take them back, as
// of now, and deletes the hibernation snapshots no session needs (logged,
// each, by the engine).
func (r *Router) sweep(ctx context.Context, now time.Time) {
	list, err := r.cfg.Registry.ListSessions(ctx)
	if err != nil {
		r.log.Warn("sweeping hibernation snapshots: reading the session registry", "err", err)
		return
	}
	entries := make(map[string]store.SessionEntry, len(list))
	for _, e := range list {
		if e.Ended == "" && e.Hibernation != "" && !r.waiting(e, now) {
			if ended, err := r.endParked(ctx, e.ID, now); err != nil {
				r.log.Warn("ending a parked session whose node did not take it back", "session_id", e.ID, "err", err)
			} else if ended {
				e.Ended = ReasonNodeLost
				r.log.Warn("a parked session's node did not take it back; it ends", "session_id", e.ID, "node", e.Node,
					"parked_at", e.ParkedAt, "expires_at", e.ExpiresAt)
			}
		}
		entries[e.ID] = e
	}
	n, err := r.eng.SweepHibernations(ctx, func(in engine.SnapshotInfo) string {
		e, ok := entries[in.SessionID]
		return r.orphaned(in, e, ok && e.Owner == in.Owner, now)
	})
	if err != nil && !errors.Is(err, engine.ErrClosed) {
		r.log.Warn("sweeping hibernation snapshots", "err", err)
	}
	if n > 0 {
		r.log.Info("orphaned hibernation snapshots deleted", "count", n)
	}
}

// waiting says that parked entry e may still be taken back by its node at
// now: within its lifetime and ParkedFor.
func (r *Router) waiting(e store.SessionEntry, now time.Time) bool {
	return parked(e, now) && (e.ParkedAt.IsZero() || now.Sub(e.ParkedAt) < r.cfg.ParkedFor)
}

// endParked marks id node_lost if it is still parked past waiting, and
// says whether it did. Its node taking it back meanwhile wins.
func (r *Router) endParked(ctx context.Context, id string, now time.Time) (bool, error) {
	e, rev, err := r.cfg.Registry.GetSession(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case e.Ended != "" || e.Hibernation == "" || r.waiting(e, now):
		return false, nil
	}
	e.Ended = ReasonNodeLost
	err = r.cfg.Registry.UpdateSession(ctx, e, rev)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return false, nil // changed meanwhile: the next sweep looks again
	}
	return err == nil, err
}

// orphaned says why hibernation snapshot in is no session's any more, ""
// when one may need it. e is the registry's entry of its session when
// mine (one of its owner's).
func (r *Router) orphaned(in engine.SnapshotInfo, e store.SessionEntry, mine bool, now time.Time) string {
	named := mine && (e.Hibernation == in.ID || e.Checkpoint == in.ID)
	switch {
	case named && e.Ended == "":
		return "" // parked: its node takes it back
	case named:
		return "its session ended while parked (" + e.Ended + ")"
	case now.Sub(in.CreatedAt) < r.cfg.OrphanAge:
		return "" // a save or a resume may be under way
	case !mine:
		return "no session of its owner is registered under its session's id"
	case e.Ended != "":
		return "its session ended (" + e.Ended + ")"
	case e.Node == r.cfg.Node:
		return "its session lives on this node without hibernating in it"
	default:
		return "" // held by another node, which sweeps it
	}
}
