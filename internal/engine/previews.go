package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/preview"
)

// Previews: a session's owner (or a preview URL the owner shared) reaches
// a web app the session serves on a port inside its jail. The calls
// authorize here, as every session call does (tenancy.go): the owner's
// key through session, a preview URL through the share it names, which
// holds the owner it was issued to and opens only that session's port.

// PreviewConfig turns previews on (pyexec serve --preview).
type PreviewConfig struct {
	Enabled bool
	// Key signs preview URLs (preview.LoadKey: DATA_DIR/preview.key).
	Key []byte
	// TTL is how long a preview URL works (--preview-ttl). Default 1h.
	TTL time.Duration
}

// Preview errors; the API maps them with errors.Is.
var (
	// ErrPreviewDisabled: the server runs without --preview (501).
	ErrPreviewDisabled = errors.New("previews are off on this server (start it with --preview)")
	ErrPortClosed      = sessions.ErrPortClosed   // 502
	ErrNoOwnNetwork    = sessions.ErrNoOwnNetwork // 409
	// ErrShareInvalid wraps preview.ErrUnknownShare, ErrRevoked and
	// ErrExpired (403).
	ErrShareInvalid = errors.New("preview URL refused")
	// ErrPreviewRelay: on a fleet, the node holding the session cannot be
	// reached or named a URL (502).
	ErrPreviewRelay = errors.New("cannot reach the node holding this session")
)

// PortShare is an issued preview URL's token.
type PortShare = preview.Share

// newShares builds the preview URLs' registry of node, nil with previews
// off.
func newShares(c PreviewConfig, node string) (*preview.Shares, error) {
	if !c.Enabled {
		return nil, nil
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	return preview.NewShares(c.Key, ttl, node)
}

// Admit is asked, once the caller is authorized and before the dial,
// whether a connection to sh's port may open (the API's limits): an
// error is returned as is and nothing is dialled. sh holds the Target
// only for the owner's key, the whole share for a preview URL.
type Admit func(sh preview.Share) error

// DialSessionPort connects to port inside c's session id (see
// sessions.Service.DialPort), if admit agrees.
func (e *Engine) DialSessionPort(ctx context.Context, id string, c Caller, port int, admit Admit) (net.Conn, error) {
	if e.shares == nil {
		return nil, ErrPreviewDisabled
	}
	s, err := e.session(id, c)
	if err != nil {
		return nil, err
	}
	if err := admit(preview.Share{Target: preview.Target{Session: id, Owner: s.Owner(), Port: port}}); err != nil {
		return nil, err
	}
	return e.sess.DialPort(ctx, s, port)
}

// ShareSessionPort issues a preview URL token for port of c's session id:
// it opens that port only, to anyone holding it, until it expires, is
// revoked or the session ends. Nothing needs to listen on the port yet.
// preview.ErrTooManyShares past MaxSharesPerPort or MaxSharesPerKey.
func (e *Engine) ShareSessionPort(_ context.Context, id string, c Caller, port int) (PortShare, error) {
	if e.shares == nil {
		return PortShare{}, ErrPreviewDisabled
	}
	if port < 1 || port > 65535 {
		return PortShare{}, fmt.Errorf("%w: port %d", ErrInvalid, port)
	}
	s, err := e.session(id, c)
	if err != nil {
		return PortShare{}, err
	}
	return e.shares.Issue(preview.Target{Session: id, Owner: s.Owner(), Port: port})
}

// RevokeSessionPort revokes every preview URL of port of c's session id
// and says how many still worked.
func (e *Engine) RevokeSessionPort(_ context.Context, id string, c Caller, port int) (int, error) {
	if e.shares == nil {
		return 0, ErrPreviewDisabled
	}
	if _, err := e.session(id, c); err != nil {
		return 0, err
	}
	return e.shares.Revoke(id, port), nil
}

// DialShared connects to the port a preview URL's token opens, on behalf
// of the session's owner it was issued to (a session that changed hands
// cannot: sessions never do), if admit agrees. The connection is closed
// when the URL is revoked, expires or the session ends. ErrShareInvalid
// for a token that opens nothing; ErrSessionNotFound once the session
// ended.
func (e *Engine) DialShared(ctx context.Context, token string, admit Admit) (net.Conn, preview.Share, error) {
	if e.shares == nil {
		return nil, preview.Share{}, ErrPreviewDisabled
	}
	s, sh, err := e.sharedSession(token)
	if err != nil {
		return nil, sh, err
	}
	if err := admit(sh); err != nil {
		return nil, sh, err
	}
	c, err := e.sess.DialPort(ctx, s, sh.Port)
	if err != nil {
		return nil, sh, err
	}
	if c, err = e.shares.Attach(token, c); err != nil {
		return nil, sh, fmt.Errorf("%w: %w", ErrShareInvalid, err)
	}
	return c, sh, nil
}

// forgetShares drops the preview URLs of a session that ended, then tells
// next.
func (e *Engine) forgetShares(next func(string, bool)) func(string, bool) {
	return func(id string, shutdown bool) {
		if e.shares != nil {
			e.shares.Forget(id)
		}
		if next != nil {
			next(id, shutdown)
		}
	}
}
