package fleetsess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/store"
)

var (
	// errNoResponders: nobody listens on the subject (the node is gone,
	// or for a create, no node has a free slot).
	errNoResponders = errors.New("no node answers")
	// errNodeGone: the node stopped answering while a request waited.
	errNodeGone = errors.New("the node stopped answering")
)

// forward sends cl for session id to the node holding it and decodes the
// answer into out (nil: no body). A session whose node does not answer
// ends here, for every node (the registry marks it node_lost); one saved
// (parked at its node's graceful shutdown, or on its checkpoint once the
// fleet declared its node lost) is taken over by this node, which answers
// the call itself (takeover.go). One with a checkpoint whose node the
// fleet's membership still counts alive is ErrUnavailable (retry later):
// one unanswered request does not make a second copy. A cell that reached
// the node before it stopped answering is not run again from a checkpoint
// (ErrUnavailable).
func (r *Router) forward(ctx context.Context, id string, c engine.Caller, cl call, out any) error {
	cl.ID, cl.Caller = id, wireCaller(c)
	for try := 0; ; try++ {
		e, _, err := r.cfg.Registry.GetSession(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return notFound(id)
		case err != nil:
			return fmt.Errorf("fleetsess: finding session %s: %w", id, err)
		case !c.Owns(e.Owner):
			return notFound(id) // worded as for an unknown id (docs/tenancy.md)
		case e.Ended != "":
			return &endedError{id: id, reason: e.Ended}
		case e.Node == r.cfg.Node && parked(e, time.Now()):
			// Not adopted yet: its snapshot could not be read before.
			err = r.takeOver(ctx, id, r.cfg.Node)
		case e.Node == r.cfg.Node:
			// The local engine has no such session: it ended while its
			// entry was being written.
			return notFound(id)
		case parked(e, time.Now()) && time.Since(e.TakenAt) < r.cfg.ClaimFor:
			return fmt.Errorf("%w: session %s is being resumed by node %s; retry later", engine.ErrUnavailable, id, e.Node)
		default:
			err = r.request(ctx, nodeSubject(e.Node), e.Node, nil, cl, out)
			if errors.Is(err, engine.ErrSessionNotFound) && parked(e, time.Now()) {
				// Its node does not hold it (it was fenced, or has not
				// taken it back yet): whoever claims it first resumes it;
				// a claim since it was read sends this call there.
				err = r.takeOver(ctx, id, e.Node)
				break
			}
			if !errors.Is(err, errNoResponders) && !errors.Is(err, errNodeGone) {
				return err
			}
			inFlight := errors.Is(err, errNodeGone) && cl.Op == opExecute
			if !parked(e, time.Now()) && e.Checkpoint != "" && r.eng.NodeAlive(e.Node) {
				// Only the fleet's membership lets a live session resume
				// from its checkpoint elsewhere (a node slow to answer, or
				// cut off from this one only, may still serve it: two
				// copies would drift apart): until it declares the node
				// lost, the session stays where it is. A parked one is no
				// node's copy: it is taken over below.
				return fmt.Errorf("%w: session %s: its node %s does not answer; retry later", engine.ErrUnavailable, id, e.Node)
			}
			if !parked(e, time.Now()) {
				err = r.lost(ctx, e)
			}
			if inFlight && (err == nil || errors.Is(err, errMoved)) {
				// The cell reached its node, which then stopped answering
				// or was declared lost: it may have run, so it is not run
				// again from the session's checkpoint on this call.
				return fmt.Errorf("%w: session %s: its node %s stopped answering while the cell ran, which may have run; "+
					"the session resumes from its checkpoint at the next call", engine.ErrUnavailable, id, e.Node)
			}
			if !parked(e, time.Now()) {
				break
			}
			err = r.takeOver(ctx, id, e.Node)
		}
		switch {
		case err == nil:
			return r.local(ctx, cl, out)
		case errors.Is(err, errMoved) && try < moveTries:
			continue // another node holds it now: ask again where
		case errors.Is(err, errMoved):
			return fmt.Errorf("%w: session %s is moving between nodes; retry later", engine.ErrUnavailable, id)
		}
		return err
	}
}

// moveTries bounds how often one call follows a session that moved.
const moveTries = 3

// parked says that e was saved by its node's graceful shutdown and is
// still within its lifetime at now: its node takes it back when it starts
// again, so a node that does not answer meanwhile does not end it. Past
// its lifetime it never will: lost.
func parked(e store.SessionEntry, now time.Time) bool {
	return e.Ended == "" && e.Hibernation != "" && (e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt))
}

// parkedSession describes parked entry e as a listing shows it, from the
// registry: hibernated, with what the entry knows.
func parkedSession(e store.SessionEntry) engine.Session {
	return engine.Session{ID: e.ID, State: engine.SessionHibernated, Caller: e.Owner, CreatedAt: e.CreatedAt,
		ExpiresAt: e.ExpiresAt}
}

// lost settles a session whose node e named does not answer (lose) and
// returns the error its client gets, or errMoved when it was parked on
// its checkpoint for a node to take over.
func (r *Router) lost(ctx context.Context, e store.SessionEntry) error {
	err := r.lose(ctx, e.ID, e.Node, "")
	var ended *endedError
	if err != nil && !errors.Is(err, errMoved) && !errors.As(err, &ended) && !errors.Is(err, engine.ErrSessionNotFound) {
		r.log.Warn("recording a lost session", "session_id", e.ID, "err", err)
		return &endedError{id: e.ID, reason: ReasonNodeLost}
	}
	return err
}

// request sends cl on subject and waits for the answer. While it waits it
// checks every CheckEvery that node (or, when node is empty, the node
// named on owner once one has taken the request) still listens, so a node
// that died never leaves the caller hanging.
func (r *Router) request(ctx context.Context, subject, node string, owner <-chan string, cl call, out any) error {
	msg, err := r.encodeMsg(ctx, subject, cl)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		m   *nats.Msg
		err error
	}
	got := make(chan answer, 1)
	go func() { // ends with cctx at the latest
		m, err := r.cfg.Conn.RequestMsgWithContext(cctx, msg)
		got <- answer{m, err}
	}()
	tick := time.NewTicker(r.cfg.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case a := <-got:
			return r.answer(ctx, subject, a.m, a.err, out)
		case n := <-owner:
			node = n
		case <-tick.C:
			if node != "" && (r.gone(ctx, node) || r.ended(ctx, cl.ID)) {
				return fmt.Errorf("fleetsess: node %s: %w", node, errNodeGone)
			}
		}
	}
}

// answer decodes a reply (or the request's error) into out.
func (r *Router) answer(ctx context.Context, subject string, m *nats.Msg, err error, out any) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("fleetsess: %s: %w", subject, errNoResponders)
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("fleetsess: request on %s: %w", subject, err)
	}
	var rep reply
	if err := r.decodeMsg(ctx, m, &rep); err != nil {
		return err
	}
	if rep.Err != nil {
		return rep.Err.decode(subject)
	}
	if out == nil || len(rep.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(rep.Body, out); err != nil {
		return fmt.Errorf("fleetsess: decoding the answer on %s: %w", subject, err)
	}
	return nil
}

// ended reports whether the registry says session id ended meanwhile, or
// was parked on its checkpoint: the fleet declared its node lost
// (Router.NodeLost), which may still listen, hung, without ever answering.
func (r *Router) ended(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	e, _, err := r.cfg.Registry.GetSession(ctx, id)
	return err == nil && (e.Ended != "" || e.FromCheckpoint)
}

// gone reports whether node no longer listens: a ping finds no
// responders. A node that is slow to answer is not gone.
func (r *Router) gone(ctx context.Context, node string) bool {
	pctx, cancel := context.WithTimeout(ctx, max(r.cfg.CheckEvery, time.Second))
	defer cancel()
	b, err := json.Marshal(call{Op: opPing})
	if err != nil {
		return false
	}
	_, err = r.cfg.Conn.RequestWithContext(pctx, nodeSubject(node), b)
	return errors.Is(err, nats.ErrNoResponders)
}

// holder is the registry's entry of c's session id, which this node's
// engine does not hold, for a preview: it names the node that does. The
// errors are the answers a session that is not there gets; a saved one
// (parked, or on its checkpoint) has no process to relay to until a call
// resumes it, so it is ErrUnavailable.
func (r *Router) holder(ctx context.Context, id string, c engine.Caller) (store.SessionEntry, error) {
	e, _, err := r.cfg.Registry.GetSession(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return e, notFound(id)
	case err != nil:
		return e, fmt.Errorf("fleetsess: finding session %s: %w", id, err)
	case !c.Owns(e.Owner):
		return e, notFound(id) // worded as for an unknown id (docs/tenancy.md)
	case e.Ended != "":
		return e, &endedError{id: id, reason: e.Ended}
	case parked(e, time.Now()):
		return e, fmt.Errorf("%w: session %s is saved while its node is away; a call on it resumes it; retry later", engine.ErrUnavailable, id)
	case e.Node == r.cfg.Node:
		// The local engine has no such session: it ended while its
		// entry was being written.
		return e, notFound(id)
	}
	return e, nil
}
