package fleetsess

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

// The API's session calls. Each tries this node's engine first, which
// answers from memory; only a session it does not hold costs a registry
// read and a request to the node holding it.

// GetSession describes a session wherever it lives.
func (r *Router) GetSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error) {
	s, err := r.eng.GetSession(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opGet}, &s)
	}
	return s, err
}

// DeleteSession ends a session wherever it lives.
func (r *Router) DeleteSession(ctx context.Context, id string, c engine.Caller) error {
	err := r.eng.DeleteSession(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opDelete}, nil)
	}
	return err
}

// ExecuteCell runs a cell wherever the session lives.
func (r *Router) ExecuteCell(ctx context.Context, id string, c engine.Caller, req engine.CellRequest) (engine.CellResult, error) {
	res, err := r.eng.ExecuteCell(ctx, id, c, req)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opExecute, Cell: &req}, &res)
	}
	return res, err
}

// InterruptSession interrupts a running cell wherever the session lives.
func (r *Router) InterruptSession(ctx context.Context, id string, c engine.Caller) error {
	err := r.eng.InterruptSession(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opInterrupt}, nil)
	}
	return err
}

// RestartSession restarts a session's interpreter wherever it lives.
func (r *Router) RestartSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error) {
	s, err := r.eng.RestartSession(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opRestart}, &s)
	}
	return s, err
}

// PutSessionFile writes a file into a session's workspace wherever it
// lives.
func (r *Router) PutSessionFile(ctx context.Context, id string, c engine.Caller, path string, data []byte) error {
	err := r.eng.PutSessionFile(ctx, id, c, path, data)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opPutFile, Path: path, Data: data}, nil)
	}
	return err
}

// ListSessionFiles lists a session's workspace wherever it lives.
func (r *Router) ListSessionFiles(ctx context.Context, id string, c engine.Caller) ([]engine.SessionFile, error) {
	files, err := r.eng.ListSessionFiles(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opListFiles}, &files)
	}
	return files, err
}

// ReadSessionFile reads a file of a session's workspace wherever it
// lives.
func (r *Router) ReadSessionFile(ctx context.Context, id string, c engine.Caller, path string) ([]byte, error) {
	data, err := r.eng.ReadSessionFile(ctx, id, c, path)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opReadFile, Path: path}, &data)
	}
	return data, err
}

// ListSessions lists c's sessions on every node, oldest first: this
// node's from its engine, the others' from the nodes the registry names.
// A node that does not answer has its sessions marked node_lost, except
// those its graceful shutdown parked, listed as hibernated (from the
// registry) until it takes them back, as are this node's own it could not
// take back yet; a node that fails is left out of the listing (logged).
func (r *Router) ListSessions(ctx context.Context, c engine.Caller) []engine.Session {
	out := r.eng.ListSessions(ctx, c)
	entries, err := r.cfg.Registry.ListSessions(ctx)
	if err != nil {
		r.log.Warn("listing the fleet's sessions: only this node's are listed", "err", err)
		return out
	}
	listed := make(map[string]bool, len(out))
	for _, s := range out {
		listed[s.ID] = true
	}
	held := make(map[string][]store.SessionEntry)
	for _, e := range entries {
		switch {
		case e.Ended != "" || !c.Owns(e.Owner):
		case e.Node != r.cfg.Node:
			held[e.Node] = append(held[e.Node], e)
		case parked(e, time.Now()) && !listed[e.ID]:
			out = append(out, parkedSession(e)) // not adopted yet
		}
	}
	nodes := make([]string, 0, len(held))
	for n := range held {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		var list []engine.Session
		err := r.request(ctx, nodeSubject(n), n, nil, call{Op: opList, Caller: wireCaller(c)}, &list)
		switch {
		case errors.Is(err, errNoResponders) || errors.Is(err, errNodeGone):
			alive := r.eng.NodeAlive(n)
			for _, e := range held[n] {
				if parked(e, time.Now()) {
					out = append(out, parkedSession(e))
					continue
				}
				if alive && e.Checkpoint != "" {
					continue // not declared lost: not resumed elsewhere on one unanswered request (forward)
				}
				err := r.lose(ctx, e.ID, n, "")
				var ended *endedError
				switch {
				case errors.Is(err, errMoved): // parked on its checkpoint
					if pe, _, gerr := r.cfg.Registry.GetSession(ctx, e.ID); gerr == nil && parked(pe, time.Now()) {
						out = append(out, parkedSession(pe))
					}
				case errors.As(err, &ended) || errors.Is(err, engine.ErrSessionNotFound):
				default:
					r.log.Warn("recording a lost session", "session_id", e.ID, "err", err)
				}
			}
		case err != nil:
			r.log.Warn("listing a node's sessions", "node", n, "err", err)
		default:
			out = append(out, list...)
		}
	}
	slices.SortFunc(out, func(a, b engine.Session) int {
		if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// CreateSession creates the session on this node when it has a free
// slot, otherwise on a node that has one (placement). With no free slot
// anywhere it is ErrTooManySessions.
func (r *Router) CreateSession(ctx context.Context, req engine.SessionRequest) (engine.Session, error) {
	if r.hasRoom() {
		return r.createLocal(ctx, req)
	}
	return r.place(ctx, req)
}

// createLocal creates the session here and registers it. A session the
// registry does not know would be unreachable from every other node, so
// one that cannot be registered is ended (fail closed).
func (r *Router) createLocal(ctx context.Context, req engine.SessionRequest) (engine.Session, error) {
	s, err := r.eng.CreateSession(ctx, req)
	if err != nil {
		return s, err
	}
	return r.register(ctx, s)
}

// register records that this node holds s, which it just made.
func (r *Router) register(ctx context.Context, s engine.Session) (engine.Session, error) {
	e := store.SessionEntry{ID: s.ID, Node: r.cfg.Node, Holder: r.instance, Owner: s.Caller, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt}
	if err := r.cfg.Registry.PutSession(ctx, e); err != nil {
		dctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		defer cancel()
		if derr := r.eng.DeleteSession(dctx, s.ID, engine.Caller{Name: s.Caller, Admin: true}); derr != nil {
			r.log.Warn("ending a session that could not be registered", "session_id", s.ID, "err", derr)
		}
		return engine.Session{}, fmt.Errorf("fleetsess: registering session %s: %w", s.ID, err)
	}
	r.updatePlacement() // before the answer: the next create sees a full node
	return s, nil
}

// SnapshotSession saves a session wherever it lives; the snapshot goes to
// the fleet's store, where every node reads it.
func (r *Router) SnapshotSession(ctx context.Context, id string, c engine.Caller) (engine.SessionSaved, error) {
	saved, err := r.eng.SnapshotSession(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opSnapshot}, &saved)
	}
	return saved, err
}

// ForkSession forks a session on the node that holds it (the fork is
// made from its live interpreter), and registers the fork there.
func (r *Router) ForkSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error) {
	s, err := r.forkLocal(ctx, id, c)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opFork}, &s)
	}
	return s, err
}

// forkLocal forks a session of this node and registers the fork.
func (r *Router) forkLocal(ctx context.Context, id string, c engine.Caller) (engine.Session, error) {
	s, err := r.eng.ForkSession(ctx, id, c)
	if err != nil {
		return s, err
	}
	return r.register(ctx, s)
}

// ListSnapshots lists c's snapshots: they are in the fleet's store, which
// this node reads.
func (r *Router) ListSnapshots(ctx context.Context, c engine.Caller) ([]engine.SnapshotInfo, error) {
	return r.eng.ListSnapshots(ctx, c)
}

// DeleteSnapshot deletes one of c's snapshots from the fleet's store.
func (r *Router) DeleteSnapshot(ctx context.Context, id string, c engine.Caller) error {
	return r.eng.DeleteSnapshot(ctx, id, c)
}
