package api

import (
	"context"
	"errors"
	"net"
	"net/http"
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
	DialSessionPort(ctx context.Context, id string, c engine.Caller, port int) (net.Conn, error)
	ShareSessionPort(ctx context.Context, id string, c engine.Caller, port int) (engine.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, c engine.Caller, port int) (int, error)
	DialShared(ctx context.Context, token string) (net.Conn, preview.Target, error)
}

var _ PreviewEngine = (*engine.Engine)(nil)

// previews serves the preview routes of a Server.
type previews struct {
	s       *Server
	eng     PreviewEngine // nil: this engine has no previews (501)
	enabled bool          // --preview
	origin  preview.Origin
	meter   *preview.Meter
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
func (s *Server) registerPreviews(hapi huma.API, mux *http.ServeMux, eng Engine, cfg config.Config) error {
	origin, err := preview.ParseOrigin(cfg.Preview.Host)
	if err != nil {
		return err
	}
	meter, err := preview.NewMeter(cfg.Preview.PreviewLimits())
	if err != nil {
		return err
	}
	p := &previews{s: s, enabled: cfg.Preview.Enabled, origin: origin, meter: meter}
	p.eng, _ = eng.(PreviewEngine)
	s.previews = p
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict,
		http.StatusInternalServerError, http.StatusNotImplemented}
	o := op(hapi, "share-session-port", http.MethodPost, "/api/v1/sessions/{id}/ports/{port}/share",
		"Share a preview URL of a port the session serves", errs...)
	o.Tags = []string{"sessions"}
	o.DefaultStatus = http.StatusCreated
	o.Description = "Returns a signed URL that opens the web app the session serves on `port` in a browser, without the API key, until it expires (--preview-ttl), is revoked (DELETE on this path) or the session ends. It opens that session's port only. Needs a server started with --preview (else 501)."
	huma.Register(hapi, o, func(ctx context.Context, in *portInput) (*struct{ Body PreviewShare }, error) {
		port, err := p.check(in.Port)
		if err != nil {
			return nil, err
		}
		sh, err := p.eng.ShareSessionPort(ctx, in.ID, callerFrom(ctx).engine(), port)
		if err != nil {
			return nil, previewError(s, err)
		}
		return &struct{ Body PreviewShare }{PreviewShare{URL: p.origin.URL(sh.Token), SessionID: sh.Session, Port: sh.Port,
			ExpiresAt: wireTime(sh.Expires), Isolation: string(p.origin.Isolation())}}, nil
	})
	o = op(hapi, "revoke-session-port", http.MethodDelete, "/api/v1/sessions/{id}/ports/{port}/share",
		"Revoke every preview URL of a session's port", errs...)
	o.Tags = []string{"sessions"}
	o.Description = "Every preview URL shared for this port stops working at once (403); connections open through them are not cut."
	huma.Register(hapi, o, func(ctx context.Context, in *portInput) (*struct{ Body PreviewRevoked }, error) {
		port, err := p.check(in.Port)
		if err != nil {
			return nil, err
		}
		n, err := p.eng.RevokeSessionPort(ctx, in.ID, callerFrom(ctx).engine(), port)
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
		p.serveShared(w, r, token, preview.PathPrefix+token+"/", true)
	})
	return nil
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
	conn, err := p.eng.DialSessionPort(r.Context(), id, callerFrom(r.Context()).engine(), port)
	if err != nil {
		writeAPIError(w, previewError(p.s, err))
		return
	}
	release, err := p.meter.Acquire(id, port)
	if err != nil {
		_ = conn.Close()
		writeAPIError(w, previewError(p.s, err))
		return
	}
	defer release()
	// Always on the API's origin, where the playground keeps the key:
	// sandboxed, whatever --preview-host says.
	p.forward(w, r, conn, "/api/v1/sessions/"+id+"/ports/"+strconv.Itoa(port)+"/", true)
}

// onPreviewHost serves the preview host (--preview-host): preview URLs
// and nothing of the API, which stays on its own origin. Requests for
// any other host go to api.
func (p *previews) onPreviewHost(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := p.origin.Match(r.Host)
		if !ok {
			api.ServeHTTP(w, r)
			return
		}
		prefix := "/"
		if p.origin.Isolation() == preview.SharedHost {
			rest, found := strings.CutPrefix(r.URL.EscapedPath(), preview.PathPrefix)
			var slash bool
			token, _, slash = strings.Cut(rest, "/")
			if !found || token == "" {
				writeError(w, errorf(http.StatusNotFound, "not a preview URL: this host serves %s<token>/ only", preview.PathPrefix))
				return
			}
			prefix = preview.PathPrefix + token + "/"
			if !slash { // the app's root: its relative links need the slash
				http.Redirect(w, r, prefix, http.StatusTemporaryRedirect)
				return
			}
		}
		if token == "" {
			writeError(w, errorf(http.StatusNotFound, "not a preview URL: this host serves <token>.%s only", strings.TrimPrefix(p.origin.String(), "*.")))
			return
		}
		p.serveShared(w, r, token, prefix, false)
	})
}

// serveShared proxies a request that carries a preview URL's token.
func (p *previews) serveShared(w http.ResponseWriter, r *http.Request, token, prefix string, sandboxed bool) {
	if !p.enabled || p.eng == nil {
		writeError(w, errorf(http.StatusNotImplemented, "%s", engine.ErrPreviewDisabled))
		return
	}
	conn, t, err := p.eng.DialShared(r.Context(), token)
	if err != nil {
		writeAPIError(w, previewError(p.s, err))
		return
	}
	release, err := p.meter.Acquire(t.Session, t.Port)
	if err != nil {
		_ = conn.Close()
		writeAPIError(w, previewError(p.s, err))
		return
	}
	defer release()
	p.forward(w, r, conn, prefix, sandboxed)
}

func (p *previews) forward(w http.ResponseWriter, r *http.Request, conn net.Conn, prefix string, sandboxed bool) {
	if !strings.HasPrefix(r.URL.EscapedPath(), prefix) {
		// The mux matched a spelling with escapes (%61 for a): what the
		// app would be asked for is unclear, so nothing is.
		_ = conn.Close()
		writeError(w, errorf(http.StatusBadRequest, "write the preview's path as %s…, without percent-escapes", prefix))
		return
	}
	preview.Serve(w, r, preview.Forward{Conn: p.meter.Wrap(conn), Prefix: prefix, Sandboxed: sandboxed,
		OnError: func(w http.ResponseWriter, err error) {
			p.s.log.Info("preview: the app gave no answer", "path", r.URL.Path, "err", err)
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
	case errors.Is(err, engine.ErrPortClosed):
		return errorf(http.StatusBadGateway, "%s", err)
	case errors.Is(err, engine.ErrNoOwnNetwork):
		return errorf(http.StatusConflict, "%s", err)
	case errors.Is(err, preview.ErrTooManyConns):
		e := errorf(http.StatusTooManyRequests, "%s", err)
		e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
		return e
	}
	return sessionError(s, err)
}
