package api

import (
	"bufio"
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
	// ShareHolder is the URL of the live node whose preview URLs carry
	// the issuer tag tag (preview.Issuer); "" when that is this node or
	// no live node. It asks no other node.
	ShareHolder(ctx context.Context, tag string) (string, error)
	// ShareSessionPort and RevokeSessionPort act on the node holding the
	// session, which keeps its preview URLs.
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
}

// relayedHeader marks a preview request one node relayed to another: the
// node that gets it answers it itself and never relays it again, so a
// stale registry cannot send a request round the fleet. Its value is the
// scheme the viewer used at the relay (http or https), which the holder
// tells the app as X-Forwarded-Proto. It grants nothing: a client that
// sends it only goes without the relay, and tells its own app a scheme.
const relayedHeader = "Pyexec-Preview-Relayed"

// relayDialTimeout bounds the connection to the holding node.
const relayDialTimeout = 5 * time.Second

// newRelayTransport is the client of relayed requests: no proxy from the
// environment, connections to the nodes kept for reuse, and the request
// and answer bytes as they are: no Accept-Encoding added, no answer
// inflated here, past the holder's byte limit (--preview-max-bytes).
// The answer's headers must come within idle (--preview-idle-timeout,
// which the holder's app has to start answering, as it would directly)
// and relayDialTimeout: a node that accepts and hangs costs a viewer a
// 502, not a connection held for ever. A WebSocket or a streamed answer,
// once its headers came, runs on under the holder's limits.
func newRelayTransport(idle time.Duration) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: relayDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   relayDialTimeout,
		ResponseHeaderTimeout: idle + relayDialTimeout,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
	}
}

// relayMethods are the methods a browser's app sends, the only ones
// proxied or relayed (pathOK): no CONNECT, no TRACE.
var relayMethods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

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

// relayShared relays a preview URL's request to the node that issued it,
// as the token names it, and reports whether it did; false: this node
// issued it, or no live node did, and answers it (403 for what it does
// not keep). No node is asked: a made-up token costs what a real one does.
func (p *previews) relayShared(w http.ResponseWriter, r *http.Request, token string) bool {
	tag, ok := preview.Issuer(token)
	if !ok {
		return false
	}
	target, err := p.fleet.ShareHolder(r.Context(), tag)
	switch {
	case err != nil:
		// The viewer has no key: the fleet's names and URLs stay in the log.
		p.s.log.Info("preview: no URL for the node that issued a preview URL", "issuer", tag, "err", err)
		writeError(w, errorf(http.StatusBadGateway, "%s", engine.ErrPreviewRelay))
		return true
	case target == "":
		return false
	}
	p.relay(w, r, target, nil, "issuer", tag)
	return true
}

// relay sends r, path, query, Host and headers as they came (a WebSocket
// upgrade included), to the node at target, and its answer back. When
// that node cannot be reached, unreachable (the owner's route) gives the
// answer of a session whose node is gone, else 502 naming the node's
// address; without it (a preview URL's viewer, who has no key) 502 says
// only that, the detail is logged.
func (p *previews) relay(w http.ResponseWriter, r *http.Request, target string, unreachable func(context.Context) error, logAttrs ...any) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		writeError(w, errorf(http.StatusBadGateway, "%s: its URL %q does not parse", engine.ErrPreviewRelay, target))
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	answer := &relayWriter{ResponseWriter: w}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			pr.Out.Host = pr.In.Host // the holder tells the preview host and its labels by it
			pr.Out.Header.Set(relayedHeader, scheme)
		},
		Transport:     p.transport,
		FlushInterval: -1, // a streaming answer goes on as it comes
		ErrorLog:      slog.NewLogLogger(p.s.log.Handler(), slog.LevelInfo),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left
			}
			p.s.log.Info("preview: the session's node cannot be reached", append(logAttrs, "node_url", target, "err", err)...)
			if answer.wrote {
				return // the answer (or the upgrade) began: too late for a status; it ends cut
			}
			if unreachable != nil {
				if err := unreachable(r.Context()); err != nil {
					writeAPIError(w, previewError(p.s, err))
					return
				}
			}
			if unreachable == nil {
				writeError(w, errorf(http.StatusBadGateway, "%s", engine.ErrPreviewRelay))
				return
			}
			writeError(w, errorf(http.StatusBadGateway, "%s (%s): %s", engine.ErrPreviewRelay, u.Host, shortErr(err)))
		},
	}
	rp.ServeHTTP(answer, r)
}

// relayWriter records whether a relayed answer began, after which no error
// status may be written.
type relayWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *relayWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *relayWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Hijack takes the connection for an upgrade (a WebSocket's 101, which
// the proxy writes on it): the answer began.
func (w *relayWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.wrote = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the writer's flush.
func (w *relayWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
