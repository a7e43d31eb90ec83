package fleetsess

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
)

// Previews on a fleet (docs/preview.md): the API relays a preview request
// for a session another node holds to that node's advertised URL, where
// the holder authorizes it as if it had come to it directly. This file
// only names the node and its URL: by the session registry for the
// owner's route, and for a preview URL by asking the fleet, since a share
// is kept by the node that issued it only. A URL comes from the
// membership registry (Config.NodeURL), never from a request.

// shareSubject is where every node answers, with its name, for the
// preview URLs it keeps (by share id, which opens nothing).
const shareSubject = "pyexec.preview.shares"

// shareLookupWait bounds the search for a preview URL's node: a node that
// keeps it answers from memory at once; the others stay silent, so a URL
// no node keeps costs this long.
const shareLookupWait = time.Second

// ShareSessionPort issues a preview URL of a session's port on the node
// that holds the session, which keeps it.
func (r *Router) ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error) {
	sh, err := r.eng.ShareSessionPort(ctx, id, c, port)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opShare, Port: port}, &sh)
	}
	return sh, err
}

// RevokeSessionPort revokes the preview URLs of a session's port on the
// node that holds the session.
func (r *Router) RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error) {
	n, err := r.eng.RevokeSessionPort(ctx, id, c, port)
	if errors.Is(err, engine.ErrSessionNotFound) {
		err = r.forward(ctx, id, c, call{Op: opRevoke, Port: port}, &n)
	}
	return n, err
}

// subscribeShares answers the fleet's questions about the preview URLs
// this node keeps.
func (r *Router) subscribeShares() (*nats.Subscription, error) {
	return r.cfg.Conn.Subscribe(shareSubject, func(m *nats.Msg) {
		id := string(m.Data)
		if _, err := hex.DecodeString(id); err != nil || id == "" || !r.eng.HoldsShare(id) {
			return
		}
		if err := m.Respond([]byte(r.cfg.Node)); err != nil {
			r.log.Warn("answering where a preview URL is kept", "share", id, "err", err)
		}
	})
}

// PreviewHolder returns the URL of the node that holds c's session id,
// which this node's engine does not hold. Its errors are those the
// session's other routes give (404, 410…), or engine.ErrPreviewRelay when
// that node cannot be named a URL.
func (r *Router) PreviewHolder(ctx context.Context, id string, c engine.Caller) (string, error) {
	e, _, err := r.holder(ctx, id, c)
	if err != nil {
		return "", err
	}
	return r.nodeURL(e.Node)
}

// PreviewUnreachable is told that the node PreviewHolder named for c's
// session id could not be reached. A node that no longer listens on NATS
// is gone: the session ends as node_lost, and that error is returned, as
// the session's other routes answer. Nil: the node is there, the fault
// is in between.
func (r *Router) PreviewUnreachable(ctx context.Context, id string, c engine.Caller) error {
	e, rev, err := r.holder(ctx, id, c)
	if err != nil {
		return err
	}
	if !r.gone(ctx, e.Node) || parked(e, time.Now()) {
		return nil
	}
	return r.lost(ctx, e, rev)
}

// ShareHolder returns the URL of the node that keeps the preview URL with
// share id id, or "" when no other node says so within shareLookupWait.
func (r *Router) ShareHolder(ctx context.Context, id string) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, shareLookupWait)
	defer cancel()
	m, err := r.cfg.Conn.RequestWithContext(lctx, shareSubject, []byte(id))
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, nats.ErrNoResponders), lctx.Err() != nil:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("fleetsess: looking for the node of preview URL %s: %w", id, err)
	}
	if node := string(m.Data); node != r.cfg.Node {
		return r.nodeURL(node)
	}
	return "", nil
}

// nodeURL is the URL node advertises. One equal to this node's own would
// send the request back here (nodes of several hosts left at the default
// 127.0.0.1): refused.
func (r *Router) nodeURL(node string) (string, error) {
	if r.cfg.NodeURL == nil {
		return "", fmt.Errorf("%w: this node does not know the fleet's URLs", engine.ErrPreviewRelay)
	}
	u, err := r.cfg.NodeURL(node)
	if err != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrPreviewRelay, err)
	}
	if own, err := r.cfg.NodeURL(r.cfg.Node); err == nil && own == u {
		return "", fmt.Errorf("%w: node %s advertises %s, this node's own URL (give each node its --advertise-url)", engine.ErrPreviewRelay, node, u)
	}
	return u, nil
}
