package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/engine/snapshots"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// The snapshot calls of the API and of the fleet's session router: save
// a session, restore one (CreateSession with FromSnapshot), fork one,
// list and delete snapshots. Each authorizes the caller first (session,
// snapshotFor: tenancy.go), then calls the sessions and the snapshots
// services.

// SnapshotSession saves the session's state and workspace as a snapshot
// owned by the session's owner. ErrSessionBusy while a cell runs,
// ErrSnapshotQuota over the owner's quota, ErrSnapshotTooLarge over the
// size cap, ErrSnapshotsDisabled on a server that keeps none.
func (e *Engine) SnapshotSession(ctx context.Context, id string, c Caller) (SessionSaved, error) {
	s, err := e.session(id, c)
	if err != nil {
		return SessionSaved{}, err
	}
	if !e.snaps.Enabled() {
		return SessionSaved{}, ErrSnapshotsDisabled
	}
	return e.sess.Snapshot(ctx, s)
}

// ForkSession starts a new session of the same owner holding a copy of
// the live session's state and files; the two then diverge.
// ErrSessionBusy while a cell of it runs.
func (e *Engine) ForkSession(ctx context.Context, id string, c Caller) (Session, error) {
	s, err := e.sessionToRun(id, c)
	if err != nil {
		return Session{}, err
	}
	return e.sess.Fork(ctx, s)
}

// restoreSession creates a session of req.Caller from its snapshot
// req.FromSnapshot: verified whole, for its owner, before any of it
// reaches a kernel. A caller at its cap of sessions, or a full node, is
// refused before the snapshot is read (Open bounds the reads at once).
func (e *Engine) restoreSession(ctx context.Context, req SessionRequest) (Session, error) {
	if _, err := e.snapshotFor(ctx, req.FromSnapshot, Caller{Name: req.Caller}, false); err != nil {
		return Session{}, err
	}
	if err := e.sess.Room(req.Caller); err != nil {
		return Session{}, err
	}
	snap, err := e.snaps.Open(ctx, req.FromSnapshot, req.Caller)
	if err != nil {
		return Session{}, err
	}
	defer snap.Close()
	// The object must be the snapshot asked for, not another of the
	// owner's put in its place in the store.
	if h := snap.Header; h.ID != req.FromSnapshot || h.Kind != snapshot.KindUser {
		return Session{}, fmt.Errorf("%w: the object stored as snapshot %s is another", ErrSnapshotIntegrity, req.FromSnapshot)
	}
	return e.sess.Restore(ctx, req, snap)
}

// AdoptSession registers, hibernated, a session that an earlier run of
// this node saved at its shutdown (OnSessionPark): the same id, owner,
// creation and expiry; its next call resumes it, and prepares its
// environment first: adopting builds none, so a start is never held by
// one. Its snapshot must verify for its owner, as the hibernation of that
// session.
func (e *Engine) AdoptSession(ctx context.Context, p ParkedSession, created, expires time.Time) (Session, error) {
	return e.sess.Adopt(ctx, p, created, expires)
}

// ListSnapshots lists the snapshots c owns (an admin's: every caller's),
// oldest first.
func (e *Engine) ListSnapshots(ctx context.Context, c Caller) ([]SnapshotInfo, error) {
	if c.Admin {
		e.appendAction(ctx, actionRecord{Action: actionListAllSnaps, Caller: c.Name, Admin: true})
	}
	return e.snaps.List(ctx, snapshot.KindUser, c.owns)
}

// DeleteSnapshot deletes one of c's snapshots.
func (e *Engine) DeleteSnapshot(ctx context.Context, id string, c Caller) error {
	if _, err := e.snapshotFor(ctx, id, c, true); err != nil {
		return err
	}
	return e.snaps.Delete(ctx, id)
}

// SweepHibernations deletes the hibernation snapshots that orphan gives a
// reason for (an empty one keeps it), except those this node's sessions
// hibernate in, and returns how many it deleted. orphan sees every
// hibernation snapshot of the store, whichever node wrote it; it decides
// from what the fleet's registry says of the session. Nothing is deleted
// once this node shuts down (ErrClosed): its sessions are being parked.
func (e *Engine) SweepHibernations(ctx context.Context, orphan func(SnapshotInfo) string) (int, error) {
	if !e.snaps.Enabled() {
		return 0, nil
	}
	held, ok := e.sess.Hibernations()
	if !ok {
		return 0, ErrClosed
	}
	list, err := e.snaps.List(ctx, snapshot.KindHibernation, func(string) bool { return true })
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range list {
		if held[in.ID] {
			continue
		}
		why := orphan(in)
		if why == "" {
			continue
		}
		if err := e.snaps.Delete(ctx, in.ID); err != nil {
			return n, err
		}
		n++
		e.log.Info("orphaned hibernation snapshot deleted", "snapshot_id", in.ID, "session_id", in.SessionID,
			"owner", in.Owner, "bytes", in.Bytes, "created_at", in.CreatedAt, "reason", why)
	}
	return n, nil
}

// vault is the snapshots service as the sessions see it.
type vault struct{ *snapshots.Service }

// Open says of a snapshot the store does not hold that it is gone, in
// the sessions' words.
func (v vault) Open(ctx context.Context, id, owner string) (*snapshot.Snapshot, error) {
	s, err := v.Service.Open(ctx, id, owner)
	if errors.Is(err, snapshots.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", sessions.ErrSnapshotGone, err)
	}
	return s, err
}

func (v vault) Begin(ctx context.Context, h snapshot.Header) (sessions.Pending, error) {
	p, err := v.Service.Begin(ctx, h)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// newSnapshots builds the snapshots service: disabled without a store for
// them.
func newSnapshots(cfg SnapshotConfig, st SnapshotStore, log *slog.Logger) (*snapshots.Service, error) {
	if st == nil {
		return snapshots.New(cfg, nil, log)
	}
	if cfg.Key.IsZero() {
		return nil, errors.New("snapshots need the server's snapshot key (Config.Snapshots.Key)")
	}
	return snapshots.New(cfg, st, log)
}
