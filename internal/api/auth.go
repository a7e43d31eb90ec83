package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// anonymous is the caller recorded when the server runs without keys: on
// such a server every request is this one caller and owns all work.
const anonymous = config.AnonymousCaller

// callerKey is the context key of the request's callerInfo.
type callerKey struct{}

// callerInfo is who sent a request: the owner of what it creates, and
// for the audit trail.
type callerInfo struct {
	Name  string // API key name, or "anonymous"
	Admin bool   // an operator key (--admin-keys): sees and kills all work
	Addr  string // client IP address (the TCP peer; proxies are not trusted)
}

// engine is the caller as the engine authorizes it.
func (c callerInfo) engine() engine.Caller { return engine.Caller{Name: c.Name, Admin: c.Admin} }

// callerFrom returns the callerInfo the auth middleware stored in ctx.
func callerFrom(ctx context.Context) callerInfo {
	c, _ := ctx.Value(callerKey{}).(callerInfo)
	return c
}

// authenticator checks API keys. Secrets are compared as SHA-256 digests
// with subtle.ConstantTimeCompare, so neither the length nor the content
// of a key leaks through timing.
type authenticator struct {
	keys   []hashedKey
	admins map[string]bool // names of operator keys
}

type hashedKey struct {
	name   string
	digest [sha256.Size]byte
}

func newAuthenticator(keys []config.APIKey, admins map[string]bool) *authenticator {
	a := &authenticator{keys: make([]hashedKey, len(keys)), admins: admins}
	for i, k := range keys {
		a.keys[i] = hashedKey{name: k.Name, digest: sha256.Sum256([]byte(k.Secret))}
	}
	return a
}

// lookup returns the name of the key matching secret. Every key is
// compared, matched or not, so timing does not reveal which one matched.
func (a *authenticator) lookup(secret string) (string, bool) {
	d := sha256.Sum256([]byte(secret))
	name, found := "", false
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare(d[:], k.digest[:]) == 1 {
			name, found = k.name, true
		}
	}
	return name, found
}

// openPath reports whether path is served without a key: liveness,
// readiness, the API's own documentation and the playground page (which
// holds no data: it asks for a key before calling the API).
func openPath(path string) bool {
	switch path {
	case "/", "/health", "/readyz", "/docs", "/openapi.json", "/openapi.yaml", "/openapi-3.0.json", "/openapi-3.0.yaml":
		return true
	}
	// A preview URL carries its own authorization (its token, which the
	// engine checks): it must open in a browser that holds no key.
	return strings.HasPrefix(path, "/docs/") || strings.HasPrefix(path, playgroundPrefix) ||
		strings.HasPrefix(path, preview.PathPrefix)
}

// presentedKey is the key a request carries: "Authorization: Bearer <key>"
// or "X-API-Key: <key>". A non-empty problem explains why there is none.
func presentedKey(r *http.Request) (key, problem string) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", "unsupported Authorization scheme: send Authorization: Bearer <key> or X-API-Key"
		}
		key = strings.TrimSpace(token)
	} else {
		key = r.Header.Get("X-API-Key")
	}
	if key == "" {
		return "", "missing API key: send Authorization: Bearer <key> or X-API-Key"
	}
	return key, ""
}

// middleware records the caller of every request and, when keys are
// configured, rejects requests to protected paths without a valid one.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := callerInfo{Name: anonymous, Addr: r.RemoteAddr}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			c.Addr = host
		}
		if len(a.keys) > 0 && !openPath(r.URL.Path) {
			key, problem := presentedKey(r)
			if problem != "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pyexec"`)
				writeError(w, errorf(http.StatusUnauthorized, "%s", problem))
				return
			}
			name, ok := a.lookup(key)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pyexec", error="invalid_token"`)
				writeError(w, errorf(http.StatusUnauthorized, "invalid API key"))
				return
			}
			c.Name, c.Admin = name, a.admins[name]
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}
