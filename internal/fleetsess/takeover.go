package fleetsess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// Taking a saved session over. A parked entry (its node's graceful
// shutdown saved it, or its node was lost after a checkpoint) names its
// snapshot; whichever node is first to need it takes it: the restarting
// node at its start, or any node that receives a call for it while its
// node does not answer. Taking is a compare-and-set of the entry's
// revision that names the taker (Node) and the time (TakenAt), before the
// snapshot is read: of two nodes, the one whose write lands second sees
// the other's claim and leaves the session to it (it answers "retry
// later" while the claim is fresh, then forwards to the taker). Once the
// engine adopted it, the entry is live again on the taker, and the call
// that took it runs there: its result says resumed, as after any
// hibernation.

// errMoved: the session is (being) taken by another node; ask the
// registry again where it lives.
var errMoved = errors.New("the session moved to another node")

// takeOver takes parked session id for this node if its entry still names
// this node or dead (a node that did not answer), and adopts it into the
// engine. A claim of another node fresher than ClaimFor answers
// ErrUnavailable; an entry that names a third node, or that another node
// took back meanwhile, errMoved. Of concurrent calls on this node, one
// takes it and the others find it in the engine.
func (r *Router) takeOver(ctx context.Context, id, dead string) error {
	unlock := r.lockTakeover(id)
	defer unlock()
	for {
		e, rev, err := r.cfg.Registry.GetSession(ctx, id)
		now := time.Now()
		switch {
		case errors.Is(err, store.ErrNotFound):
			return notFound(id)
		case err != nil:
			return fmt.Errorf("fleetsess: finding session %s: %w", id, err)
		case e.Ended != "":
			return &endedError{id: id, reason: e.Ended}
		case !parked(e, now) && e.Node == r.cfg.Node:
			return nil // taken here meanwhile
		case !parked(e, now):
			return errMoved
		case e.Node != r.cfg.Node && e.Node != dead:
			return errMoved
		case e.Node != r.cfg.Node && now.Sub(e.TakenAt) < r.cfg.ClaimFor:
			return fmt.Errorf("%w: session %s is being resumed by node %s; retry later", engine.ErrUnavailable, id, e.Node)
		}
		if _, err := r.eng.GetSession(ctx, id, engine.Caller{Name: e.Owner}); err == nil {
			// adopted here before, its entry not cleared (a registry error)
			return r.unpark(ctx, e)
		}
		from := e.Node
		e.Node, e.Holder, e.TakenAt = r.cfg.Node, r.instance, now
		err = r.cfg.Registry.UpdateSession(ctx, e, rev)
		if errors.Is(err, store.ErrConflict) {
			continue // changed meanwhile: look again
		}
		if err != nil {
			return fmt.Errorf("%w: session %s: taking it over: %w", engine.ErrUnavailable, id, err)
		}
		if from != r.cfg.Node {
			r.log.Info("session taken over from a node that does not answer", "session_id", id, "from", from)
		}
		err = r.adopt(ctx, e, from)
		switch {
		case from == r.cfg.Node:
		case errors.Is(err, engine.ErrTooManySessions):
			r.release(ctx, e, from)
			return fmt.Errorf("%w: session %s: this node has no room to resume it now; retry later", engine.ErrUnavailable, id)
		case errors.Is(err, engine.ErrSnapshotIntegrity):
			r.release(ctx, e, from)
			return fmt.Errorf("%w: session %s: this node cannot verify its snapshot; retry later", engine.ErrUnavailable, id)
		}
		return err
	}
}

// release gives claimed entry e back to node from, unclaimed, when this
// node has no room for it: another node may take it at once.
func (r *Router) release(ctx context.Context, claimed store.SessionEntry, from string) {
	e, rev, err := r.cfg.Registry.GetSession(ctx, claimed.ID)
	if err != nil || e.Node != r.cfg.Node || !e.TakenAt.Equal(claimed.TakenAt) {
		return
	}
	e.Node, e.Holder, e.TakenAt = from, "", time.Time{}
	if err := r.cfg.Registry.UpdateSession(ctx, e, rev); err != nil {
		r.log.Warn("giving back a saved session this node has no room for", "session_id", e.ID, "err", err)
	}
}

// adopt hands claimed parked entry e, taken from node from, to the
// engine, then clears its park. One whose snapshot cannot be read now
// stays parked on this node, for a later call or sweep to try again; one
// over this node's caps, or whose snapshot does not verify here (a fleet
// whose nodes' snapshot keys differ), taken from another node, is that
// caller's to give back; any other that cannot be adopted ends (node_lost), and the
// sweep deletes its snapshot if the engine did not.
func (r *Router) adopt(ctx context.Context, e store.SessionEntry, from string) error {
	p := engine.ParkedSession{ID: e.ID, Caller: e.Owner, Snapshot: e.Hibernation}
	if e.FromCheckpoint {
		p.Restored = &engine.RestoredFrom{SnapshotID: e.Hibernation, CellsLost: e.CellsLost,
			CheckpointExecutionCount: e.CheckpointCells}
	}
	_, err := r.eng.AdoptSession(ctx, p, e.CreatedAt, e.ExpiresAt)
	switch {
	case errors.Is(err, engine.ErrClosed):
		return fmt.Errorf("%w: session %s: this node shuts down; retry later", engine.ErrUnavailable, e.ID)
	case errors.Is(err, engine.ErrUnavailable):
		r.log.Warn("a saved session cannot be taken back now; it stays saved", "session_id", e.ID, "err", err)
		return err
	case errors.Is(err, engine.ErrTooManySessions) && from != r.cfg.Node:
		return err // another node's: given back (release)
	case errors.Is(err, engine.ErrSnapshotIntegrity) && from != r.cfg.Node:
		// Its own node may verify it: this one's snapshot key differs.
		r.log.Error("a saved session of another node does not verify here: every node of a fleet needs the same --snapshot-key",
			"session_id", e.ID, "from", from, "err", err)
		return err
	case err != nil:
		r.log.Warn("a saved session could not be taken back; it ends", "session_id", e.ID, "err", err)
		reason, merr := r.markEnded(ctx, e.ID, ReasonNodeLost)
		if merr != nil && !errors.Is(merr, store.ErrNotFound) {
			r.log.Warn("recording a lost session", "session_id", e.ID, "err", merr)
		}
		return &endedError{id: e.ID, reason: cmpReason(reason)}
	}
	if err := r.unpark(ctx, e); err != nil {
		r.log.Warn("updating the session registry", "session_id", e.ID, "err", err)
	}
	r.log.Info("saved session taken back", "session_id", e.ID, "snapshot_id", e.Hibernation)
	return nil
}

func cmpReason(reason string) string {
	if reason == "" {
		return ReasonNodeLost
	}
	return reason
}

// local runs cl on this node's engine and decodes its answer into out, as
// a forwarded call's would be.
func (r *Router) local(ctx context.Context, cl call, out any) error {
	body, err := r.dispatch(ctx, cl)
	if err != nil || out == nil || body == nil {
		return err
	}
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		return fmt.Errorf("fleetsess: passing on the answer for session %s: %w", cl.ID, err)
	}
	return nil
}

// lockTakeover serializes this node's takeovers of session id.
func (r *Router) lockTakeover(id string) func() {
	for {
		r.mu.Lock()
		busy, ok := r.taking[id]
		if !ok {
			busy = make(chan struct{})
			r.taking[id] = busy
			r.mu.Unlock()
			return func() {
				r.mu.Lock()
				delete(r.taking, id)
				r.mu.Unlock()
				close(busy)
			}
		}
		r.mu.Unlock()
		<-busy
	}
}
