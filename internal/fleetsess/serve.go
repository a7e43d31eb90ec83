package fleetsess

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
)

// serveMsg answers a request of another node on its own goroutine: a
// cell may run for minutes, and the subscription's messages are otherwise
// handled one at a time.
func (r *Router) serveMsg(m *nats.Msg) {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		var cl call
		var body any
		err := r.decodeMsg(r.ctx, m, &cl)
		if err == nil {
			body, err = r.dispatch(r.ctx, cl)
		}
		r.respond(m, body, err)
	}()
}

// dispatch runs one call on this node's engine.
func (r *Router) dispatch(ctx context.Context, cl call) (any, error) {
	c := cl.Caller.engine()
	switch cl.Op {
	case opPing:
		return nil, nil
	case opCreate:
		return r.createHere(ctx, cl)
	case opList:
		return r.eng.ListSessions(ctx, c), nil
	case opGet:
		return result(r.eng.GetSession(ctx, cl.ID, c))
	case opDelete:
		return nil, r.eng.DeleteSession(ctx, cl.ID, c)
	case opExecute:
		if cl.Cell == nil {
			return nil, fmt.Errorf("%w: execute without a cell", engine.ErrInvalid)
		}
		return result(r.eng.ExecuteCell(ctx, cl.ID, c, *cl.Cell))
	case opInterrupt:
		return nil, r.eng.InterruptSession(ctx, cl.ID, c)
	case opRestart:
		return result(r.eng.RestartSession(ctx, cl.ID, c))
	case opPutFile:
		return nil, r.eng.PutSessionFile(ctx, cl.ID, c, cl.Path, cl.Data)
	case opListFiles:
		return result(r.eng.ListSessionFiles(ctx, cl.ID, c))
	case opReadFile:
		return result(r.eng.ReadSessionFile(ctx, cl.ID, c, cl.Path))
	case opSnapshot:
		return result(r.eng.SnapshotSession(ctx, cl.ID, c))
	case opFork:
		return result(r.forkLocal(ctx, cl.ID, c))
	case opShare:
		return result(r.eng.ShareSessionPort(ctx, cl.ID, c, cl.Port))
	case opRevoke:
		return result(r.eng.RevokeSessionPort(ctx, cl.ID, c, cl.Port))
	}
	return nil, fmt.Errorf("fleetsess: unknown operation %q", cl.Op)
}

func result[T any](v T, err error) (any, error) { return v, err }

// respond sends the reply to m; a reply that cannot be sent shows up as
// a timeout at the requester.
func (r *Router) respond(m *nats.Msg, body any, err error) {
	var rep reply
	if err != nil {
		rep.Err = encodeError(err)
	} else if body != nil {
		b, merr := json.Marshal(body)
		if merr != nil {
			rep.Err = encodeError(merr)
		}
		rep.Body = b
	}
	// The reply is sent even after Close began: the requester waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	msg, err := r.encodeMsg(ctx, m.Reply, rep)
	if err == nil {
		err = m.RespondMsg(msg)
	}
	if err != nil {
		r.log.Warn("answering another node's session request", "err", err)
	}
}
