//go:build linux

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// A server listens before its stack is up, and the stack may wait a long
// time: for a NATS cluster that is forming or has lost its majority, a
// node waits rather than exit (fleets start in any order). Meanwhile the
// port answers: /health and /readyz say 503 and what the server waits
// for, every other path 503 with the same words, so that a load balancer
// and an orchestrator see a node that is not ready, and a person sees why.

// Start-up states /health reports before the server is ready.
const (
	stateStarting    = "starting"
	stateWaitingNATS = "waiting for NATS"
)

// startup is what the server says while its stack starts.
type startup struct {
	version string
	// hideDetail leaves the details out of /health on a server with API
	// keys: they name hosts, and /health needs no key.
	hideDetail bool

	mu     sync.Mutex
	state  string
	detail string
}

func newStartup(version string, hideDetail bool) *startup {
	return &startup{version: version, hideDetail: hideDetail, state: stateStarting}
}

// set records the state and what it waits for.
func (s *startup) set(state, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.detail = state, detail
}

// waitingForNATS is the store's WaitFunc: every failed attempt is logged
// and shown on /health until the next one, or until the server is ready.
func (s *startup) waitingForNATS(log *slog.Logger) func(what string, err error, retryIn time.Duration) {
	return func(what string, err error, retryIn time.Duration) {
		log.Warn("waiting for NATS", "step", what, "err", err, "retry_in", retryIn.Round(time.Millisecond))
		s.set(stateWaitingNATS, what+": "+err.Error())
	}
}

// startingBody is the JSON of /health and /readyz before the server is
// ready.
type startingBody struct {
	Status  string `json:"status"`
	Detail  string `json:"detail,omitempty"`
	Version string `json:"version"`
}

// ServeHTTP answers every request with 503 and the start-up state.
func (s *startup) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body := startingBody{Status: s.state, Detail: s.detail, Version: s.version}
	s.mu.Unlock()
	if s.hideDetail {
		body.Detail = ""
	}
	// The API takes over the port soon: no connection is kept for later.
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	var v any = body
	if r.URL.Path != "/health" && r.URL.Path != "/readyz" {
		msg := "the server is starting (" + body.Status
		if body.Detail != "" {
			msg += ": " + body.Detail
		}
		v = map[string]string{"error": msg + "); try again shortly"}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// serveStartup answers on ln with s until the returned function is
// called; that function hands ln over: the listener it returns gets every
// connection accepted from then on, and closing it closes ln.
func serveStartup(ln net.Listener, s *startup, log *slog.Logger) func() net.Listener {
	a := &acceptor{ln: ln, conns: make(chan net.Conn), failed: make(chan struct{}), closed: make(chan struct{})}
	go a.run()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(a.view(false)) // ends when Shutdown closes the view
	}()
	return func() net.Listener {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
		return a.view(true)
	}
}

// acceptor accepts the connections of one listener and hands each to
// whichever of its views asks next.
type acceptor struct {
	ln     net.Listener
	conns  chan net.Conn
	failed chan struct{} // closed when Accept fails (ln closed); err says why
	err    error
	closed chan struct{} // closed with the owner's view
}

func (a *acceptor) run() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			a.err = err
			close(a.failed)
			return
		}
		select {
		case a.conns <- c:
		case <-a.closed:
			c.Close()
			return
		}
	}
}

// view is a listener of the acceptor's connections; closing the owner's
// view closes the acceptor's listener too.
func (a *acceptor) view(owner bool) net.Listener {
	return &acceptorView{a: a, owner: owner, closed: make(chan struct{})}
}

type acceptorView struct {
	a      *acceptor
	owner  bool
	once   sync.Once
	closed chan struct{}
}

func (v *acceptorView) Accept() (net.Conn, error) {
	select {
	case c := <-v.a.conns:
		return c, nil
	case <-v.a.failed:
		return nil, v.a.err
	case <-v.closed:
		return nil, net.ErrClosed
	}
}

func (v *acceptorView) Close() error {
	var err error
	v.once.Do(func() {
		close(v.closed)
		if v.owner {
			close(v.a.closed)
			err = v.a.ln.Close()
		}
	})
	return err
}

func (v *acceptorView) Addr() net.Addr { return v.a.ln.Addr() }
