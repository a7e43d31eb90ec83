package api

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// Previews on a fleet (docs/preview.md): a preview request for a session
// this node does not hold is relayed, unchanged, to the node that holds
// it, at the URL that node advertises in the membership registry. That
// node authorizes it itself (the owner's key, or the preview URL's
// share) and applies its limits, as if the request had come to it: this
// node adds no trust and reaches no address a request names.

// PreviewFleet names, on a fleet, the node that holds a preview's session
// when this node does not; *fleetsess.Router implements it.
type PreviewFleet interface {
	// PreviewHolder is the URL of the node holding c's session id, or the
	// error the session's other routes would answer (404, 410…), or
	// engine.ErrPreviewRelay.
	PreviewHolder(ctx context.Context, id string, c engine.Caller) (string, error)
	// PreviewUnreachable is told that the node PreviewHolder named could
	// not be reached; it returns the session's error when that node is
	// gone (410 node_lost), nil otherwise.
	PreviewUnreachable(ctx context.Context, id string, c engine.Caller) error
	// ShareHolder is the URL of the node keeping the preview URL with
	// share id id; "" when no other node keeps it.
	ShareHolder(ctx context.Context, id string) (string, error)
	// ShareSessionPort and RevokeSessionPort act on the node holding the
	// session, which keeps its preview URLs.
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
}

// relayedHeader marks a preview request one node relayed to another: the
// node that gets it answers it itself and never relays it again, so a
// stale registry cannot send a request round the fleet. It grants
// nothing: a client that sends it only goes without the relay.
const relayedHeader = "Pyexec-Preview-Relayed"

// relayDialTimeout bounds the connection to the holding node.
const relayDialTimeout = 5 * time.Second

// newRelayTransport is the client of relayed requests: no proxy from the
// environment, connections to the nodes kept for reuse.
func newRelayTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: relayDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: relayDialTimeout,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
}

// relayable says whether a request this node cannot answer from its own
// sessions may go to another node: on a fleet, and not relayed already.
func (p *previews) relayable(r *http.Request) bool {
	return p.fleet != nil && r.Header.Get(relayedHeader) == ""
}

// relayOwner relays the owner's request for session id to its node, or
// answers why it cannot.
func (p *previews) relayOwner(w http.ResponseWriter, r *http.Request, id string, port int) {
	c := callerFrom(r.Context()).engine()
	target, err := p.fleet.PreviewHolder(r.Context(), id, c)
	if err != nil {
		writeAPIError(w, previewError(p.s, err))
		return
	}
	p.relay(w, r, target, func(ctx context.Context) error { return p.fleet.PreviewUnreachable(ctx, id, c) },
		"session", id, "port", port)
}

// relayShared relays a preview URL's request to the node that keeps its
// share and reports whether it did; false: no other node keeps it, this
// node answers.
func (p *previews) relayShared(w http.ResponseWriter, r *http.Request, token string) bool {
	id, ok := preview.ShareID(token)
	if !ok || p.eng.HoldsShare(id) {
		return false
	}
	target, err := p.fleet.ShareHolder(r.Context(), id)
	switch {
	case err != nil:
		writeAPIError(w, previewError(p.s, err))
		return true
	case target == "":
		return false
	}
	p.relay(w, r, target, nil, "share", id)
	return true
}

// relay sends r, path, query, Host and headers as they came (a WebSocket
// upgrade included), to the node at target, and its answer back. When
// that node cannot be reached, unreachable (if set) gives the answer of a
// session whose node is gone; else 502.
func (p *previews) relay(w http.ResponseWriter, r *http.Request, target string, unreachable func(context.Context) error, logAttrs ...any) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		writeError(w, errorf(http.StatusBadGateway, "%s: its URL %q does not parse", engine.ErrPreviewRelay, target))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			pr.Out.Host = pr.In.Host // the holder tells the preview host and its labels by it
			pr.Out.Header.Set(relayedHeader, "1")
		},
		Transport:     p.transport,
		FlushInterval: -1, // a streaming answer goes on as it comes
		ErrorLog:      slog.NewLogLogger(p.s.log.Handler(), slog.LevelInfo),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left
			}
			p.s.log.Info("preview: the session's node cannot be reached", append(logAttrs, "node_url", target, "err", err)...)
			if unreachable != nil {
				if err := unreachable(r.Context()); err != nil {
					writeAPIError(w, previewError(p.s, err))
					return
				}
			}
			writeError(w, errorf(http.StatusBadGateway, "%s (%s): %s", engine.ErrPreviewRelay, u.Host, shortErr(err)))
		},
	}
	rp.ServeHTTP(w, r)
}
