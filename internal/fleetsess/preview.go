package fleetsess

import (
	"context"
	"errors"
	"fmt"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// Previews on a fleet (docs/preview.md): the API relays a preview request
// for a session another node holds to that node's advertised URL, where
// the holder authorizes it as if it had come to it directly. This file
// only names the node and its URL: by the session registry for the
// owner's route, and for a preview URL by the node its token names
// (preview.Issuer), since a share is kept by the node that issued it only. A URL comes from the
// membership registry (Config.NodeURL), never from a request.

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

// PreviewHolder returns the URL of the node that holds c's session id,
// which this node's engine does not hold. Its errors are those the
// session's other routes give (404, 410…), or engine.ErrPreviewRelay when
// that node cannot be named a URL.
func (r *Router) PreviewHolder(ctx context.Context, id string, c engine.Caller) (string, error) {
	e, err := r.holder(ctx, id, c)
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
	e, err := r.holder(ctx, id, c)
	if err != nil {
		return err
	}
	if !r.gone(ctx, e.Node) {
		return nil
	}
	if e.Checkpoint != "" && r.eng.NodeAlive(e.Node) {
		// As for the session's other calls (forward): only the fleet's
		// membership lets it resume from its checkpoint elsewhere.
		return fmt.Errorf("%w: session %s: its node %s does not answer; retry later", engine.ErrUnavailable, id, e.Node)
	}
	err = r.lost(ctx, e)
	if errors.Is(err, errMoved) {
		// Parked on its checkpoint: the session's next call resumes it.
		return fmt.Errorf("%w: session %s: its node %s is lost; a call on it resumes it; retry later", engine.ErrUnavailable, id, e.Node)
	}
	return err
}

// ShareHolder returns the URL of the node whose preview URLs carry the
// issuer tag tag (preview.IssuerTag), or "" when that is this node or no
// live node: this node answers. It asks no one: the tag is read from the
// token, and the names from the membership registry this node keeps, so
// a token no node issued costs nothing more than one this node did.
func (r *Router) ShareHolder(_ context.Context, tag string) (string, error) {
	if r.cfg.Nodes == nil || tag == preview.IssuerTag(r.cfg.Node) {
		return "", nil
	}
	for _, n := range r.cfg.Nodes() {
		if n != r.cfg.Node && preview.IssuerTag(n) == tag {
			return r.nodeURL(n)
		}
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
	if err == nil {
		// as its --advertise-url was checked there: a registry entry is
		// no more trusted than a flag
		err = config.CheckAdvertiseURL(u)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrPreviewRelay, err)
	}
	if own, err := r.cfg.NodeURL(r.cfg.Node); err == nil && own == u {
		return "", fmt.Errorf("%w: node %s advertises %s, this node's own URL (give each node its --advertise-url)", engine.ErrPreviewRelay, node, u)
	}
	return u, nil
}
