package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SessionsBucket is the fleet's registry of sessions: which node holds
// each live session, and why a session whose node went away ended.
const SessionsBucket = "PYEXEC_SESSIONS"

// DefaultSessionTTL keeps a registry entry longer than the longest
// session may live (24h by default), plus time for a client to learn why
// a session ended.
const DefaultSessionTTL = 25 * time.Hour

// SessionEntry is one session in the registry.
type SessionEntry struct {
	ID string `json:"id"`
	// Node holds the session's interpreter; requests for it go there.
	Node string `json:"node"`
	// Holder is the run of Node (a token new at each start of its
	// process) that holds the live session: a write by a node about a
	// session it holds must find its own token here (fencing: a run that
	// was declared lost, whose session another run took over, never
	// writes over it).
	Holder string `json:"holder,omitempty"`
	// Owner is the caller (API key name) the session belongs to.
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Ended, when set, is why the session ended without being deleted
	// (node_lost, node_shutdown); the entry stays so that its clients learn
	// the reason instead of a bare "not found".
	Ended string `json:"ended,omitempty"`
	// Hibernation is the snapshot a session was saved as when its node
	// shut down gracefully: the node's next run adopts it. ParkedAt is
	// when it was recorded.
	Hibernation string    `json:"hibernation,omitempty"`
	ParkedAt    time.Time `json:"parked_at,omitzero"`
	// TakenAt is when a node claimed the parked session (Node names it)
	// to take it back: another node leaves it alone for a while.
	TakenAt time.Time `json:"taken_at,omitzero"`
	// Cells is how many cells the session had run when last recorded;
	// Checkpoint is its latest automatic checkpoint (a hibernation
	// snapshot), taken after cell CheckpointCells.
	Cells           int    `json:"cells,omitempty"`
	Checkpoint      string `json:"checkpoint,omitempty"`
	CheckpointCells int    `json:"checkpoint_cells,omitempty"`
	// FromCheckpoint, set with Hibernation on a session whose node was
	// lost, says that Hibernation is its checkpoint, and CellsLost how
	// many cells ran after it: the node that resumes it says so.
	FromCheckpoint bool `json:"from_checkpoint,omitempty"`
	CellsLost      int  `json:"cells_lost,omitempty"`
}

// SessionRegistry records where the fleet's sessions live.
type SessionRegistry interface {
	// PutSession writes e under e.ID.
	PutSession(ctx context.Context, e SessionEntry) error
	// GetSession returns the entry of id and its revision; ErrNotFound
	// when there is none.
	GetSession(ctx context.Context, id string) (SessionEntry, uint64, error)
	// UpdateSession rewrites an entry if revision is still its latest;
	// ErrConflict otherwise.
	UpdateSession(ctx context.Context, e SessionEntry, revision uint64) error
	// DeleteSession removes the entry of id; a missing one is not an
	// error.
	DeleteSession(ctx context.Context, id string) error
	// ListSessions returns every entry, ended ones included.
	ListSessions(ctx context.Context) ([]SessionEntry, error)
}

var _ SessionRegistry = (*NATS)(nil)

func (s *NATS) openSessions(ctx context.Context) (err error) {
	s.sessions, err = s.openKV(ctx, SessionsBucket, "pyexec sessions: the node holding each", s.cfg.SessionTTL, -1)
	return err
}

// PutSession writes an entry, replacing any other.
func (s *NATS) PutSession(ctx context.Context, e SessionEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: encoding session %s: %w", e.ID, err)
	}
	if _, err := s.sessions.Put(ctx, e.ID, b); err != nil {
		return fmt.Errorf("store: registering session %s: %w", e.ID, mapErr(err))
	}
	return nil
}

// GetSession reads an entry.
func (s *NATS) GetSession(ctx context.Context, id string) (SessionEntry, uint64, error) {
	v, err := s.sessions.Get(ctx, id)
	if errors.Is(err, jetstream.ErrInvalidKey) {
		// An id no session could have (the API passes ids through).
		return SessionEntry{}, 0, fmt.Errorf("store: session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return SessionEntry{}, 0, fmt.Errorf("store: reading session %s: %w", id, mapErr(err))
	}
	var e SessionEntry
	if err := json.Unmarshal(v.Value(), &e); err != nil {
		return SessionEntry{}, 0, fmt.Errorf("store: decoding session %s: %w", id, err)
	}
	return e, v.Revision(), nil
}

// UpdateSession rewrites an entry under compare-and-set.
func (s *NATS) UpdateSession(ctx context.Context, e SessionEntry, revision uint64) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: encoding session %s: %w", e.ID, err)
	}
	if _, err := s.sessions.Update(ctx, e.ID, b, revision); err != nil {
		return fmt.Errorf("store: updating session %s: %w", e.ID, mapErr(err))
	}
	return nil
}

// DeleteSession removes an entry.
func (s *NATS) DeleteSession(ctx context.Context, id string) error {
	err := s.sessions.Delete(ctx, id)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("store: removing session %s: %w", id, mapErr(err))
	}
	return nil
}

// ListSessions reads every entry through a watcher, which delivers the
// latest value of each key and then a nil marker.
func (s *NATS) ListSessions(ctx context.Context) ([]SessionEntry, error) {
	w, err := s.sessions.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("store: listing sessions: %w", mapErr(err))
	}
	defer w.Stop()
	var out []SessionEntry
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("store: listing sessions: %w", ctx.Err())
		case v, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("store: listing sessions: %w", ErrClosed)
			}
			if v == nil {
				return out, nil
			}
			var e SessionEntry
			if err := json.Unmarshal(v.Value(), &e); err != nil {
				return nil, fmt.Errorf("store: decoding session %s: %w", v.Key(), err)
			}
			out = append(out, e)
		}
	}
}
