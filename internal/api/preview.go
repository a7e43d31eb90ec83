package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// Previews (docs/preview.md): the owner's key reaches a port a session
// serves at /api/v1/sessions/{id}/ports/{port}/…; a preview URL
// (POST …/share) reaches it without the key, at /preview/<token>/… on
// the API's origin (sandboxed) or on --preview-host. Every call is
// authorized by the engine; these handlers parse, dial through it and
// proxy (internal/preview).

// PreviewEngine is what previews need; *engine.Engine implements it.
type PreviewEngine interface {
	DialSessionPort(ctx context.Context, id string, c engine.Caller, port int, admit engine.Admit) (net.Conn, error)
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
	DialShared(ctx context.Context, token string, admit engine.Admit) (net.Conn, preview.Share, error)
}

var _ PreviewEngine = (*engine.Engine)(nil)

// previews serves the preview routes of a Server.
type previews struct {
	s       *Server
	eng     PreviewEngine // nil: this engine has no previews (501)
	enabled bool          // --preview
	origin  preview.Origin
	meter   *preview.Meter
	// fleet names the node of a session held elsewhere, where requests
	// are relayed over transport (preview_fleet.go); nil off a fleet.
	fleet     PreviewFleet
	transport *http.Transport
}

// PreviewShare is the answer to POST /api/v1/sessions/{id}/ports/{port}/share.
type PreviewShare struct {
	URL       string `json:"url" doc:"The preview URL: absolute on a preview host, else a path on this server's origin (resolve it against the API's base URL)" example:"/preview/mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpiyteni/"`
	SessionID string `json:"session_id"`
	Port      int    `json:"port"`
	ExpiresAt Time   `json:"expires_at"`
	Isolation string `json:"isolation" enum:"sandbox,preview_host,per_preview" doc:"How the app is kept from the API's origin: sandbox (same origin, Content-Security-Policy: sandbox, no cookies), preview_host (a separate origin shared by every preview), per_preview (an origin of its own)"`
}

// PreviewRevoked is the answer to DELETE /api/v1/sessions/{id}/ports/{port}/share.
type PreviewRevoked struct {
	Revoked int `json:"revoked" doc:"Preview URLs of this port that worked until now"`
}

type portInput struct {
	ID   string `path:"id"`
	Port string `path:"port" doc:"1-65535 in decimal digits, no sign, leading zero or space" example:"8501"`
}

// registerPreviews adds the preview routes: the share operations to the
// API document, the proxies to mux. They answer 501 without --preview.
func (s *Server) registerPreviews(hapi huma.API, mux *http.ServeMux, eng Engine, cfg config.Config, fleet PreviewFleet) error {
	origin, err := preview.ParseOrigin(cfg.Preview.Host)
	if err != nil {
		return err
	}
	meter, err := preview.NewMeter(cfg.Preview.PreviewLimits())
	if err != nil {
		return err
	}
	p := &previews{s: s, enabled: cfg.Preview.Enabled, origin: origin, meter: meter, fleet: fleet}
	if fleet != nil {
		p.transport = newRelayTransport(cfg.Preview.IdleTimeout)
	}
	p.eng, _ = eng.(PreviewEngine)
	s.previews = p
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict,
		http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusNotImplemented}
	o := op(hapi, "share-session-port", http.MethodPost, "/api/v1/sessions/{id}/ports/{port}/share",
		"Share a preview URL of a port the session serves", errs...)
	o.Tags = []string{"sessions"}
	o.DefaultStatus = http.StatusCreated
	o.Description = fmt.Sprintf("Returns a signed URL that opens the web app the session serves on `port` in a browser, without the API key, until it expires (--preview-ttl), is revoked (DELETE on this path) or the session ends. It opens that session's port only. A port holds at most %d live URLs and a key %d URLs (revoked ones count until they would have expired): 429 beyond. Needs a server started with --preview (else 501).",
		preview.MaxSharesPerPort, preview.MaxSharesPerKey)
	huma.Register(hapi, o, func(ctx context.Context, in *portInput) (*struct{ Body PreviewShare }, error) {
		port, err := p.check(in.Port)
		if err != nil {
			return nil, err
		}
		sh, err := p.shares().ShareSessionPort(ctx, in.ID, callerFrom(ctx).engine(), port)
		if err != nil {
			return nil, previewError(s, err)
		}
		return &struct{ Body PreviewShare }{PreviewShare{URL: p.origin.URL(sh), SessionID: sh.Session, Port: sh.Port,
			ExpiresAt: wireTime(sh.Expires), Isolation: string(p.origin.Isolation())}}, nil
	})
	o = op(hapi, "revoke-session-port", http.MethodDelete, "/api/v1/sessions/{id}/ports/{port}/share",
		"Revoke every preview URL of a session's port", errs...)
	o.Tags = []string{"sessions"}
	o.Description = "Every preview URL shared for this port stops working at once (403), and the connections open through them (a WebSocket) are closed."
	huma.Register(hapi, o, func(ctx context.Context, in *portInput) (*struct{ Body PreviewRevoked }, error) {
		port, err := p.check(in.Port)
		if err != nil {
			return nil, err
		}
		n, err := p.shares().RevokeSessionPort(ctx, in.ID, callerFrom(ctx).engine(), port)
		if err != nil {
			return nil, previewError(s, err)
		}
		return &struct{ Body PreviewRevoked }{PreviewRevoked{Revoked: n}}, nil
	})
	mux.HandleFunc("/api/v1/sessions/{id}/ports/{port}/{path...}", p.serveOwner)
	mux.HandleFunc(preview.PathPrefix+"{token}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if p.origin.Isolation() != preview.Sandboxed {
			writeError(w, errorf(http.StatusNotFound, "preview URLs are served on %s, not on the API's origin", p.origin))
			return
		}
		token := r.PathValue("token")
		p.serveShared(w, r, token, "", preview.PathPrefix+token+"/", true)
	})
	return nil
}

// shareIssuer issues and revokes preview URLs.
type shareIssuer interface {
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
}

// shares issues preview URLs on the node holding the session: through
// the fleet when there is one.
func (p *previews) shares() shareIssuer {
	if p.fleet != nil {
		return p.fleet
	}
	return p.eng
}

// check turns the routes away on a server without previews, then reads
// the port.
func (p *previews) check(raw string) (int, error) {
	if !p.enabled || p.eng == nil {
		return 0, errorf(http.StatusNotImplemented, "%s", engine.ErrPreviewDisabled)
	}
	port, err := preview.ParsePort(raw)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "%s", err)
	}
	return port, nil
}

// serveOwner proxies a request of the session's owner (their key).
func (p *previews) serveOwner(w http.ResponseWriter, r *http.Request) {
	port, err := p.check(r.PathValue("port"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	id := r.PathValue("id")
	prefix := "/api/v1/sessions/" + id + "/ports/" + strconv.Itoa(port) + "/"
	if !pathOK(w, r, prefix) {
		return
	}
	var release func()
	conn, err := p.eng.DialSessionPort(r.Context(), id, callerFrom(r.Context()).engine(), port, func(sh preview.Share) (err error) {
		release, err = p.meter.Acquire(sh.Target, false)
		return err
	})
	if release != nil {
		defer release()
	}
	if errors.Is(err, engine.ErrSessionNotFound) && p.relayable(r) {
		p.relayOwner(w, r, id, port)
		return
	}
	if err != nil {
		writeAPIError(w, previewError(p.s, err))
		return
	}
	// Always on the API's origin, where the playground keeps the key:
	// sandboxed, whatever --preview-host says.
	p.forward(w, r, conn, prefix, true, "session", id, "port", port)
}

// pathOK refuses a path the mux matched in a spelling with escapes (%61
// for a), or with a dot segment after prefix, raw or escaped (.., %2e%2e,
// ..%2F): what the app would be asked for is unclear (a proxy in front of
// a node may resolve it to another route), so nothing is, and nothing is
// dialled or relayed. It refuses as well the methods no browser's app
// sends (CONNECT, TRACE: relayMethods), 405.
func pathOK(w http.ResponseWriter, r *http.Request, prefix string) bool {
	if !relayMethods[r.Method] {
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
		writeError(w, errorf(http.StatusMethodNotAllowed, "a preview takes no %s", r.Method))
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), prefix)
	if !ok {
		writeError(w, errorf(http.StatusBadRequest, "write the preview's path as %s…, without percent-escapes", prefix))
		return false
	}
	if dotSegment(rest) {
		writeError(w, errorf(http.StatusBadRequest, "a preview's path has no . or .. segment after %s, escaped or not", prefix))
		return false
	}
	return true
}

// dotSegment says whether the escaped path rest has a segment that is
// "." or "..", once unescaped (an escaped slash splits segments too).
func dotSegment(rest string) bool {
	p, err := url.PathUnescape(rest)
	if err != nil {
		p = rest
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// onPreviewHost serves the preview host (--preview-host): preview URLs
// and nothing of the API, which stays on its own origin. Requests for
// any other host go to api.
func (p *previews) onPreviewHost(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		label, ok := p.origin.Match(r.Host)
		if !ok {
			api.ServeHTTP(w, r)
			return
		}
		if p.origin.Isolation() == preview.PerPreview && label == "" {
			writeError(w, errorf(http.StatusNotFound, "not a preview URL: this host serves <label>.%s%s<token>/ only",
				strings.TrimPrefix(p.origin.String(), "*."), preview.PathPrefix))
			return
		}
		rest, found := strings.CutPrefix(r.URL.EscapedPath(), preview.PathPrefix)
		token, _, slash := strings.Cut(rest, "/")
		if !found || token == "" {
			writeError(w, errorf(http.StatusNotFound, "not a preview URL: this host serves %s<token>/ only", preview.PathPrefix))
			return
		}
		prefix := preview.PathPrefix + token + "/"
		if !slash { // the app's root: its relative links need the slash
			http.Redirect(w, r, prefix, http.StatusTemporaryRedirect)
			return
		}
		p.serveShared(w, r, token, label, prefix, false)
	})
}

// serveShared proxies a request that carries a preview URL's token; on a
// wildcard preview host label is the host's first label, which must be
// the share's own.
func (p *previews) serveShared(w http.ResponseWriter, r *http.Request, token, label, prefix string, sandboxed bool) {
	if !p.enabled || p.eng == nil {
		writeError(w, errorf(http.StatusNotImplemented, "%s", engine.ErrPreviewDisabled))
		return
	}
	if !pathOK(w, r, prefix) {
		return
	}
	if p.relayable(r) && p.relayShared(w, r, token) {
		return
	}
	var release func()
	conn, sh, err := p.eng.DialShared(r.Context(), token, func(sh preview.Share) (err error) {
		if p.origin.Isolation() == preview.PerPreview && sh.Label != label {
			// Another share's host: that origin is not this app's.
			return fmt.Errorf("%w: %w", engine.ErrShareInvalid, preview.ErrUnknownShare)
		}
		release, err = p.meter.Acquire(sh.Target, true)
		return err
	})
	if release != nil {
		defer release()
	}
	if err != nil {
		writeAPIError(w, previewError(p.s, err))
		return
	}
	p.forward(w, r, conn, prefix, sandboxed, "session", sh.Session, "port", sh.Port, "share", sh.ID)
}

// forward proxies r over conn; logAttrs name the preview in the log (never
// its token).
func (p *previews) forward(w http.ResponseWriter, r *http.Request, conn net.Conn, prefix string, sandboxed bool, logAttrs ...any) {
	scheme := r.Header.Get(relayedHeader) // the viewer's at the relay, if relayed
	r.Header.Del(relayedHeader)           // the relay's, not the app's
	preview.Serve(w, r, preview.Forward{Conn: p.meter.Wrap(conn), Prefix: prefix, Sandboxed: sandboxed, Scheme: scheme,
		OnError: func(w http.ResponseWriter, err error) {
			p.s.log.Info("preview: the app gave no answer", append(logAttrs, "err", err)...)
			writeError(w, errorf(http.StatusBadGateway, "the app in the session gave no answer: %s", shortErr(err)))
		}})
}

// shortErr is the last part of a wrapped error, which says what happened
// without the layers' prefixes.
func shortErr(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// previewError maps the preview errors, then the session ones.
func previewError(s *Server, err error) error {
	switch {
	case errors.Is(err, engine.ErrPreviewDisabled):
		return errorf(http.StatusNotImplemented, "%s", engine.ErrPreviewDisabled)
	case errors.Is(err, engine.ErrShareInvalid):
		return errorf(http.StatusForbidden, "%s", shortErr(err))
	case errors.Is(err, engine.ErrPortClosed), errors.Is(err, engine.ErrPreviewRelay):
		return errorf(http.StatusBadGateway, "%s", err)
	case errors.Is(err, engine.ErrNoOwnNetwork):
		return errorf(http.StatusConflict, "%s", err)
	case errors.Is(err, preview.ErrTooManyShares):
		// No Retry-After: a URL frees its place when revoked or expired.
		return errorf(http.StatusTooManyRequests, "%s", err)
	case errors.Is(err, preview.ErrTooManyConns):
		e := errorf(http.StatusTooManyRequests, "%s", err)
		e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
		return e
	}
	return sessionError(s, err)
}
