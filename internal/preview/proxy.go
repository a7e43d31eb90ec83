package preview

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// sandboxPolicy is the Content-Security-Policy of an app served on the
// API's own origin: its pages run in an opaque origin, so they cannot
// read what the playground keeps for that origin (its API key in local
// storage) nor call the API as that origin.
const sandboxPolicy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// Forward says how one request is proxied.
type Forward struct {
	// Conn is the connection into the session's jail, already dialled by
	// the caller for the viewer it authorized; Forward owns it from here
	// and closes it.
	Conn net.Conn
	// Prefix is the escaped path the app does not see: the request's
	// path after it is what the app is asked for ("/" when nothing
	// follows). The app gets it as X-Forwarded-Prefix.
	Prefix string
	// Sandboxed: the app is served on the API's own origin (no preview
	// host): its responses get Content-Security-Policy: sandbox and lose
	// their Set-Cookie, Clear-Site-Data (they would act on the API
	// origin's cookies and storage) and WWW-Authenticate (a password
	// prompt in the API's name). Else the app is on a preview host, which
	// it may share with other previews: its Set-Cookie is kept to Prefix
	// and that host (no Domain), and its Clear-Site-Data and
	// Service-Worker-Allowed (a service worker for the whole host) are
	// dropped.
	Sandboxed bool
	// Scheme is the scheme the viewer used, "http" or "https", when the
	// request came through another node (which said so); else, or when
	// it is neither, the request's own connection tells it. The app gets
	// it as X-Forwarded-Proto.
	Scheme string
	// OnError writes the answer to a request the app never answered (it
	// closed the connection, sent no valid response, or the limits closed
	// it), 502.
	OnError func(w http.ResponseWriter, err error)
}

// Serve proxies r to the app over f.Conn: HTTP/1.1, and for a request
// that asks to switch protocols (a WebSocket) the upgraded connection,
// copied both ways until either side ends. Before the request leaves,
// what identifies the viewer to pyexec is taken off it: the
// Authorization and X-API-Key headers and the cookies whose name starts
// with "pyexec"; the app is never handed the viewer's key, nor the
// viewer's address (X-Forwarded-For, X-Real-Ip and the like are removed,
// none is added). Interim answers (1xx but 101, such as 103 Early Hints)
// are not passed on: their headers would skip the filters above.
func Serve(w http.ResponseWriter, r *http.Request, f Forward) {
	var once sync.Once
	dial := func(context.Context, string, string) (net.Conn, error) {
		var c net.Conn
		once.Do(func() { c = f.Conn })
		if c == nil {
			return nil, errors.New("the preview's connection was already used")
		}
		return c, nil
	}
	defer func() {
		// Never dialled (the request failed before it left): close it.
		once.Do(func() { _ = f.Conn.Close() })
	}()
	tr := &http.Transport{
		DialContext:        dial,
		DisableKeepAlives:  true, // one connection, one request
		DisableCompression: true, // the viewer's Accept-Encoding goes through
		Proxy:              nil,  // never the environment's proxy
	}
	defer tr.CloseIdleConnections()
	rest := strings.TrimPrefix(r.URL.EscapedPath(), f.Prefix)
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			out.URL.Scheme, out.URL.Host = "http", "app" // the dial ignores it
			out.URL.RawPath = rest
			if p, err := url.PathUnescape(rest); err == nil {
				out.URL.Path = p
			} else {
				out.URL.Path, out.URL.RawPath = rest, ""
			}
			// Out.Host stays the viewer's: an app that checks Origin
			// against Host (Streamlit's WebSocket) sees them agree.
			StripCredentials(out.Header)
			for _, h := range clientAddressHeaders {
				out.Header.Del(h)
			}
			// The host and scheme the viewer used, not who the viewer is.
			out.Header.Set("X-Forwarded-Host", pr.In.Host)
			proto := f.Scheme
			switch {
			case proto == "http" || proto == "https":
			case pr.In.TLS != nil:
				proto = "https"
			default:
				proto = "http"
			}
			out.Header.Set("X-Forwarded-Proto", proto)
			out.Header.Set("X-Forwarded-Prefix", strings.TrimSuffix(f.Prefix, "/"))
		},
		ModifyResponse: func(resp *http.Response) error {
			filterResponse(resp.Header, f)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { f.OnError(w, err) },
	}
	rp.ServeHTTP(noInterim{w}, r)
}

// clientAddressHeaders say who the viewer is (or, sent by the viewer,
// lie about it): none reaches the app.
var clientAddressHeaders = []string{"X-Forwarded-For", "X-Real-Ip", "True-Client-Ip", "Cf-Connecting-Ip",
	"X-Client-Ip", "X-Cluster-Client-Ip", "Forwarded"}

// filterResponse takes off the app's answer what would act beyond the
// app (Forward.Sandboxed).
func filterResponse(h http.Header, f Forward) {
	h.Del("Clear-Site-Data")
	h.Del("Service-Worker-Allowed")
	if f.Sandboxed {
		h.Add("Content-Security-Policy", sandboxPolicy)
		h.Del("Set-Cookie")
		h.Del("Www-Authenticate")
		return
	}
	lines := h.Values("Set-Cookie")
	h.Del("Set-Cookie")
	for _, line := range lines {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			continue // what the browser would make of it is unclear
		}
		c.Domain, c.Path = "", f.Prefix
		if v := c.String(); v != "" {
			h.Add("Set-Cookie", v)
		}
	}
}

// noInterim passes on no 1xx answer but 101 (Switching Protocols, which
// is final): the reverse proxy copies an interim answer's headers as they
// are.
type noInterim struct{ http.ResponseWriter }

func (w noInterim) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the viewer's connection (an
// upgrade hijacks it).
func (w noInterim) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StripCredentials removes from h what a viewer's browser or client sends
// pyexec to say who it is: the API key headers and pyexec's cookies.
// Other cookies (the app's own) go through.
func StripCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del("X-Api-Key")
	lines := h.Values("Cookie")
	h.Del("Cookie")
	var kept []string
	for _, line := range lines {
		for _, c := range strings.Split(line, ";") {
			c = strings.TrimSpace(c)
			name, _, _ := strings.Cut(c, "=")
			if c == "" || strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), "pyexec") {
				continue
			}
			kept = append(kept, c)
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}
