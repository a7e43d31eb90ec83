package fleetsess

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
)

// Placement: a node listens on placeSubject, in one queue group with the
// others, only while it has a free session slot, so a create forwarded
// there reaches one node with room, or finds no responders when the fleet
// is full. The slot may be taken between the two (the node then answers
// ErrTooManySessions): the create tries again, up to placeTries times.
const (
	placeTries = 3
	// placeRecheck bounds how late a node notices a slot that freed up
	// without telling this package (it checks at every create and every
	// end too).
	placeRecheck = 500 * time.Millisecond
)

// hasRoom reports whether this node can take one more session.
func (r *Router) hasRoom() bool {
	r.mu.Lock()
	closing := r.closing
	r.mu.Unlock()
	return !closing && r.eng.LiveSessions() < r.eng.SessionCap()
}

// placement keeps the placement subscription in step with this node's
// free slots until Close.
func (r *Router) placement() {
	t := time.NewTicker(placeRecheck)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.updatePlacement()
	}
}

func (r *Router) updatePlacement() {
	room := r.hasRoom()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closing:
	case room && r.placeSub == nil:
		sub, err := r.cfg.Conn.QueueSubscribe(placeSubject, placeQueue, r.serveMsg)
		if err == nil {
			// Once the server knows the subscription, a create that finds
			// this node full elsewhere cannot miss the slot.
			err = r.cfg.Conn.Flush()
		}
		if err != nil {
			r.log.Warn("offering this node's free session slots", "err", err)
			if sub != nil {
				_ = sub.Unsubscribe()
			}
			return
		}
		r.placeSub = sub
	case !room && r.placeSub != nil:
		if err := r.placeSub.Unsubscribe(); err != nil {
			r.log.Warn("withdrawing this node's session slots", "err", err)
		}
		r.placeSub = nil
	}
}

// place creates the session on another node with a free slot.
func (r *Router) place(ctx context.Context, req engine.SessionRequest) (engine.Session, error) {
	var err error
	for range placeTries {
		var s engine.Session
		s, err = r.placeOnce(ctx, req)
		switch {
		case errors.Is(err, errNoResponders):
			return engine.Session{}, fmt.Errorf("%w: this server holds its maximum of %d sessions and no other node of the fleet has a free slot",
				engine.ErrTooManySessions, r.eng.SessionCap())
		case errors.Is(err, errNodeGone):
			return engine.Session{}, fmt.Errorf("%w: the node creating the session stopped; try again", engine.ErrUnavailable)
		case !errors.Is(err, engine.ErrTooManySessions):
			return s, err
		}
	}
	return engine.Session{}, err
}

// placeOnce offers the create to the nodes with room. The node that takes
// it names itself on a private inbox (so that its death is noticed) and
// sends the installer's lines there while it builds the environment.
func (r *Router) placeOnce(ctx context.Context, req engine.SessionRequest) (engine.Session, error) {
	inbox := r.cfg.Conn.NewInbox()
	owner := make(chan string, 1)
	ended := make(chan struct{})
	progress := req.Progress
	sub, err := r.cfg.Conn.Subscribe(inbox, func(m *nats.Msg) {
		switch {
		case m.Header.Get(endHeader) != "":
			close(ended)
		case m.Header.Get(nodeHeader) != "":
			select {
			case owner <- m.Header.Get(nodeHeader):
			default:
			}
		case progress != nil:
			progress(string(m.Data))
		}
	})
	if err != nil {
		return engine.Session{}, fmt.Errorf("fleetsess: subscribing to install progress: %w", err)
	}
	defer sub.Unsubscribe()
	var s engine.Session
	cl := call{Op: opCreate, Caller: callerWire{Name: req.Caller}, Create: &req, Progress: inbox}
	err = r.request(ctx, placeSubject, "", owner, cl, &s)
	if err == nil {
		// The lines were sent before the answer, but reach this inbox's
		// handler on a goroutine of its own: let it catch up.
		select {
		case <-ended:
		case <-time.After(progressCatchUp):
		}
	}
	return s, err
}

// progressCatchUp bounds the wait for install lines still on their way
// once a placed create answered.
const progressCatchUp = time.Second

// createHere takes a create another node placed here.
func (r *Router) createHere(ctx context.Context, cl call) (engine.Session, error) {
	if cl.Create == nil {
		return engine.Session{}, fmt.Errorf("%w: create without a request", engine.ErrInvalid)
	}
	if !r.hasRoom() {
		return engine.Session{}, fmt.Errorf("%w: node %s holds its maximum of sessions", engine.ErrTooManySessions, r.cfg.Node)
	}
	req := *cl.Create
	if cl.Progress != "" {
		ack := nats.NewMsg(cl.Progress)
		ack.Header.Set(nodeHeader, r.cfg.Node)
		if err := r.cfg.Conn.PublishMsg(ack); err != nil {
			return engine.Session{}, fmt.Errorf("fleetsess: accepting a create: %w", err)
		}
		req.Progress = func(line string) { _ = r.cfg.Conn.Publish(cl.Progress, []byte(line)) }
		defer func() {
			end := nats.NewMsg(cl.Progress)
			end.Header.Set(endHeader, "1")
			_ = r.cfg.Conn.PublishMsg(end) // without it, the requester waits progressCatchUp
		}()
	}
	return r.createLocal(ctx, req)
}
