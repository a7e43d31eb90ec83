package sessions

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// sessionSecret is the operator's credential of the session tests.
const sessionSecret = "ghp_SessionS3cretValue-13579-qwerty"

// netPlanner plans network as the engine does for a server whose egress
// reaches the test world w (allowed.test and other.test on its list;
// nil: a world that is never reached) and terminates TLS, with the
// secret GITHUB_TOKEN (sessionSecret, for allowed.test, for the key
// tester) in a catalog the test may replace as SIGHUP does.
func netPlanner(t *testing.T, w *egresstest.World) (*run.Planner, *egress.LiveCatalog) {
	t.Helper()
	return netPlannerLimits(t, w, egress.Limits{ConnectTimeout: 3 * time.Second})
}

// netPlannerLimits is netPlanner with the operator's egress limits lim.
func netPlannerLimits(t *testing.T, w *egresstest.World, lim egress.Limits) (*run.Planner, *egress.LiveCatalog) {
	t.Helper()
	allow, err := egress.ParseRules([]string{"allowed.test", "other.test"})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := egress.NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsca.New()
	if err != nil {
		t.Fatal(err)
	}
	roots, hosts, worldCA := x509.NewCertPool(), egress.StaticResolver{}, []byte(nil)
	if w != nil {
		roots.AppendCertsFromPEM(w.CAPEM)
		hosts, worldCA = egress.StaticResolver(w.Hosts), w.CAPEM
	}
	netCfg := &egress.Config{Policy: egress.Policy{Allow: allow}, Guard: guard, Resolver: hosts,
		Limits: lim, Intercept: &egress.Interception{Issuer: ca, Roots: roots}}
	bundle := filepath.Join(t.TempDir(), "trust", "ca-bundle.pem")
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(append(slices.Clone(worldCA), '\n'), ca.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := egress.ParseCatalog([]byte(`{"secrets": [{"name": "GITHUB_TOKEN", "value": "`+sessionSecret+`",
		"hosts": ["allowed.test"], "header": "Authorization: Bearer {value}", "keys": ["`+tester+`"]}]}`), egress.OSLookup)
	if err != nil {
		t.Fatal(err)
	}
	live := egress.NewLiveCatalog(cat)
	pl, err := run.NewPlanner(run.Config{AllowNetwork: true, Network: netCfg, Secrets: live, TrustBundle: bundle}, run.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return pl, live
}

// logBuffer keeps what a service logs, for the tests to search.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pyGet defines get(url): what the URL answers, or "refused: " and the
// error's type.
const pyGet = `
def get(u):
    import urllib.request  # here: a fork or a resume brings back modules, not their submodules
    try:
        return urllib.request.urlopen(u, timeout=5).read().decode()
    except Exception as e:
        return "refused: " + type(e).__name__
`

// TestSessionNetwork: a session with network and an allow list reaches
// the allowed host in one cell and the next (one egress for the
// session's life), is refused another host the operator allows but its
// list does not, and reports both in its cells' network events; it
// starts cold on a service with a fork server; a restart and a fork keep
// the policy; a preview reaches its ports without widening its network; a
// session without network reaches nothing.
func TestSessionNetwork(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlanner(t, w)
	svc := newServiceDeps(t, Config{}, true, Deps{Network: pl})
	created, err := svc.Create(context.Background(), Request{Caller: tester, MemoryBytes: 64 << 20, Network: true,
		NetworkAllow: []string{"allowed.test"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	id := created.ID
	if !created.Network || kernelOf(t, svc, id).forked {
		t.Errorf("network %v, forked %v: want a session with network, started cold beside a fork server",
			created.Network, kernelOf(t, svc, id).forked)
	}

	// A refused lookup comes with the result of the cell that asked; a
	// connection's event when it ends: with its cell's result or a later
	// one. A refused name is reported once per egress.
	reach := func(id, what string, lookup bool) {
		t.Helper()
		var evs []run.NetworkEvent
		r := cell(t, svc, id, `get("http://allowed.test/")`)
		evs = append(evs, r.NetworkEvents...)
		if result(r) != "'hello allowed.test'" {
			t.Fatalf("%s: allowed.test answered %q (stderr %q)", what, result(r), r.Stderr)
		}
		r = cell(t, svc, id, `get("http://other.test/")`)
		evs = append(evs, r.NetworkEvents...)
		if !strings.HasPrefix(result(r), "'refused: ") {
			t.Errorf("%s: other.test answered %q", what, result(r))
		}
		if lookup && !slices.ContainsFunc(r.NetworkEvents, func(ev run.NetworkEvent) bool {
			return ev.Proto == "dns" && ev.Host == "other.test" && ev.Verdict == egress.VerdictDeny && ev.Reason == egress.ReasonNotAllowed
		}) {
			t.Errorf("%s: no refused lookup of other.test in the result of the cell that asked: %+v", what, r.NetworkEvents)
		}
		waitFor(t, 5*time.Second, what+": the allowed connection reported", func() bool {
			evs = append(evs, live(t, svc, id).use.take()...)
			return slices.ContainsFunc(evs, func(ev run.NetworkEvent) bool {
				return ev.Proto == "tcp" && ev.Host == "allowed.test" && ev.Port == 80 && ev.Verdict == egress.VerdictAllow
			})
		})
	}
	cell(t, svc, id, pyGet)
	reach(id, "first cells", true)
	reach(id, "later cells", false)

	child, err := svc.Fork(context.Background(), live(t, svc, id))
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	reach(child.ID, "the fork", true) // get comes with the parent's state

	if _, err := svc.Restart(context.Background(), live(t, svc, id)); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	cell(t, svc, id, pyGet)
	reach(id, "after a restart", true)

	// A preview reaches the session's own loopback and adds nothing to
	// its outbound network.
	cell(t, svc, id, serveCell)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := svc.DialPort(ctx, live(t, svc, id), 8000)
	if err != nil {
		t.Fatalf("a preview of the session with network: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); string(b) != "hello" {
		t.Errorf("the app through the preview: %q, %v", b, err)
	}
	c.Close()
	if r := cell(t, svc, id, `get("http://other.test/")`); !strings.HasPrefix(result(r), "'refused: ") {
		t.Errorf("after a preview other.test answered %q", result(r))
	}

	none := newSession(t, svc, Request{})
	cell(t, svc, none, pyGet)
	if r := cell(t, svc, none, `get("http://allowed.test/")`); !strings.HasPrefix(result(r), "'refused: ") || len(r.NetworkEvents) != 0 {
		t.Errorf("a session without network: %q, events %+v", result(r), r.NetworkEvents)
	}
	if live(t, svc, none).Info().Network {
		t.Error("a session without network says it has network")
	}
}

// pyAuth defines auth(token): what allowed.test's /auth answers to a
// request that carries token as the template puts it.
const pyAuth = `
import os
def auth(tok, path="/auth"):
    import urllib.request
    req = urllib.request.Request("https://allowed.test" + path, headers={"Authorization": "Bearer " + tok})
    return urllib.request.urlopen(req, timeout=10).read().decode()
`

// TestSessionSecrets: a session asking for an operator secret holds a
// placeholder; the test host receives the value, in one cell and the
// next, after a resume from hibernation and in a fork (each with a
// placeholder of its own: the parent's, carried in the fork's variables,
// is not replaced there); a reflection comes back with the placeholder;
// no cell result, session description or log line holds the value in
// any form, and each injection is told to the service's OnNetworkEvent.
// Once the operator removed the secret a hibernated session's resume is
// refused.
func TestSessionSecrets(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, cat := netPlanner(t, w)
	var logs logBuffer
	v := newVault(t)
	var told atomic.Int64 // injections the service told of (the server's metrics)
	svc := newServiceDeps(t, Config{HibernateAfter: 300 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, false,
		Deps{Network: pl, Vault: v, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), OnNetworkEvent: func(ev egress.Event) {
			if ev.Secret == "GITHUB_TOKEN" && ev.Verdict == egress.VerdictAllow {
				told.Add(1)
			}
		}})
	id := newSession(t, svc, Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}})
	var kept bytes.Buffer // everything the session answered
	keep := func(x any) {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		kept.Write(b)
	}
	h := egresstest.Hash
	injected := "1 " + h("Bearer "+sessionSecret) + " " + h("") + " " + h("")
	do := func(id, code string) string {
		t.Helper()
		r := cell(t, svc, id, code)
		keep(r)
		if r.Error != "" {
			t.Fatalf("cell %q: %s: %s", code, r.ErrorType, r.Error)
		}
		return strings.Trim(result(r), "'")
	}

	do(id, pyAuth)
	ph := do(id, `token = os.environ["GITHUB_TOKEN"]; token`)
	if len(ph) != len(sessionSecret) || ph == sessionSecret {
		t.Fatalf("the placeholder %q", ph)
	}
	for range 2 {
		if got := do(id, "auth(token)"); got != injected {
			t.Errorf("the host received %q, want %q (the value)", got, injected)
		}
	}
	if got, want := do(id, `auth(token, "/reflect")`), "Bearer "+ph+"|Bearer "+ph; got != want {
		t.Errorf("the reflection read %q, want %q", got, want)
	}

	// A fork: the parent's policy, a placeholder of its own.
	child, err := svc.Fork(context.Background(), live(t, svc, id))
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	keep(child)
	childPH := do(child.ID, `os.environ["GITHUB_TOKEN"]`)
	if len(childPH) != len(sessionSecret) || childPH == ph {
		t.Errorf("the fork's placeholder %q, the parent's %q", childPH, ph)
	}
	if got := do(child.ID, `auth(os.environ["GITHUB_TOKEN"])`); got != injected {
		t.Errorf("the fork's host received %q, want the value", got)
	}
	if got, want := do(child.ID, "auth(token)"), "1 "+h("Bearer "+ph)+" "+h("")+" "+h(""); got != want {
		t.Errorf("the parent's placeholder sent by the fork arrived as %q, want itself %q", got, want)
	}
	svc.Delete(live(t, svc, child.ID))

	// Hibernated and resumed: the policy kept, a new placeholder.
	hibernated(t, svc, id)
	r := cell(t, svc, id, `auth(os.environ["GITHUB_TOKEN"])`)
	keep(r)
	if !r.Resumed || strings.Trim(result(r), "'") != injected {
		t.Errorf("after a resume: resumed %v, the host received %s (%s)", r.Resumed, result(r), r.Error)
	}
	keep(live(t, svc, id).Info())

	// The operator removes the secret: the next resume is refused.
	hibernated(t, svc, id)
	cat.Store(&egress.Catalog{})
	_, err = executeCell(context.Background(), svc, id, CellRequest{Code: "1"})
	if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("a resume whose secret is gone: %v, want ErrInvalid naming the secret", err)
	}
	if st := live(t, svc, id).Info().State; st != Hibernated {
		t.Errorf("after the refused resume the session is %s, want hibernated", st)
	}

	forms := []string{sessionSecret, base64.StdEncoding.EncodeToString([]byte(sessionSecret)),
		base64.RawURLEncoding.EncodeToString([]byte(sessionSecret)), hex.EncodeToString([]byte(sessionSecret))}
	for _, f := range forms {
		if strings.Contains(kept.String(), f) || strings.Contains(logs.String(), f) {
			t.Errorf("the value (as %q) is in a cell's result, the session or the log", f)
		}
	}
	if n := told.Load(); n < 4 {
		t.Errorf("%d injections told to OnNetworkEvent, want at least 4", n)
	}
	if !strings.Contains(logs.String(), `"secret":"GITHUB_TOKEN"`) || !strings.Contains(logs.String(), `"session_id":"`+id+`"`) {
		t.Errorf("no injection logged for the session: %s", logs.String())
	}
}

// TestSessionNetworkRefusals: a session is refused what an execution is
// refused (400, ErrInvalid), before any kernel starts: network on a
// server that does not allow it, an allow list without network, secrets
// without network, a secret that does not exist or is not for the key
// (in the same words), a secret whose host the session's list does not
// allow, a session's own env that sets a secret's name.
func TestSessionNetworkRefusals(t *testing.T) {
	pl, _ := netPlanner(t, nil)
	svc := newServiceDeps(t, Config{}, false, Deps{Network: pl})
	off := newServiceDeps(t, Config{}, false, Deps{})
	create := func(svc *Service, req Request) error {
		if req.Caller == "" {
			req.Caller = tester
		}
		req.MemoryBytes = 64 << 20
		_, err := svc.Create(context.Background(), req)
		return err
	}
	for name, c := range map[string]struct {
		svc  *Service
		req  Request
		want string
	}{
		"network disabled":       {off, Request{Network: true}, "disabled on this server"},
		"allow without network":  {svc, Request{NetworkAllow: []string{"allowed.test"}}, "without network"},
		"empty allow list":       {svc, Request{Network: true, NetworkAllow: []string{}}, "empty network allow list"},
		"secrets without":        {svc, Request{Secrets: []string{"GITHUB_TOKEN"}}, "secrets need network"},
		"unknown secret":         {svc, Request{Network: true, Secrets: []string{"NOPE"}}, `secret "NOPE" is not defined for this API key`},
		"another key's secret":   {svc, Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}, Caller: "someone-else"}, `secret "GITHUB_TOKEN" is not defined for this API key`},
		"outside the allow list": {svc, Request{Network: true, NetworkAllow: []string{"other.test"}, Secrets: []string{"GITHUB_TOKEN"}}, "does not allow"},
		"env sets the secret":    {svc, Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}, Env: []string{"GITHUB_TOKEN=mine"}}, "env sets GITHUB_TOKEN"},
	} {
		err := create(c.svc, c.req)
		if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", name, err, c.want)
		}
	}
	if n := svc.Stats().Live + off.Stats().Live; n != 0 {
		t.Errorf("%d sessions live after the refusals", n)
	}
}

// noNetworkJails prepares every jail without a network namespace of its
// own, whatever the base asks: attaching an egress to one fails.
type noNetworkJails struct{ *sandbox.Manager }

func (j noNetworkJails) Prepare(ctx context.Context, base sandbox.Base) (*sandbox.Jail, error) {
	base.Network = false
	return j.Manager.Prepare(ctx, base)
}

// TestSessionEgressAttachFails: a session whose egress cannot be attached
// is not created (the reason says so), and nothing of it is left; a
// session without network on the same jails is.
func TestSessionEgressAttachFails(t *testing.T) {
	pl, _ := netPlanner(t, nil)
	svc := newServiceDeps(t, Config{}, false, Deps{Network: pl, Jails: noNetworkJails{runtest.Jails(t)}})
	_, err := svc.Create(context.Background(), Request{Caller: tester, MemoryBytes: 64 << 20, Network: true})
	if err == nil || !strings.Contains(err.Error(), "attaching the session's egress") {
		t.Fatalf("Create with an egress that cannot be attached: %v", err)
	}
	if n := svc.Stats().Live; n != 0 {
		t.Errorf("%d sessions live after the failed create", n)
	}
	newSession(t, svc, Request{})
}

// TestSessionNetworkParked: a session with network and a secret parked at
// shutdown comes back at the next start with its network (its policy from
// its hibernation's header, checked again): its egress injects the value
// for a new placeholder, and its allow list still refuses another host.
// The events no cell's result had before the shutdown come with the
// first cell after the adoption: a lookup refused after its cell
// returned, and the end (execution_ended) of a connection the session
// held open, which the hibernation cut before its header was written.
func TestSessionNetworkParked(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlanner(t, w)
	v := newVault(t)
	var rec parkRecorder
	var late atomic.Bool
	svc := newServiceDeps(t, Config{InterruptGrace: 200 * time.Millisecond}, false, Deps{Network: pl, Vault: v, OnPark: rec.park,
		OnNetworkEvent: func(ev egress.Event) {
			if isLateLookup(ev) {
				late.Store(true)
			}
		}})
	id := newSession(t, svc, Request{Network: true, NetworkAllow: []string{"allowed.test"}, Secrets: []string{"GITHUB_TOKEN"}})
	cell(t, svc, id, pyAuth+pyGet+`old = os.environ["GITHUB_TOKEN"]
import socket, threading
def late():
    try: socket.getaddrinfo("late.test", 80)
    except OSError: pass
threading.Timer(0.5, late).start()
held = socket.create_connection(("allowed.test", `+strconv.Itoa(egresstest.HoldPort)+`), timeout=10)
`)
	waitFor(t, 5*time.Second, "the lookup after the cell refused", late.Load)
	waitFor(t, 5*time.Second, "the test host holds the connection", func() bool { return w.Held.Load() == 1 })
	closeWithin(t, svc, 10*time.Second)
	snap, ok := rec.snapshot(id)
	if !ok {
		t.Fatal("the session was not parked at shutdown")
	}

	next := newServiceDeps(t, Config{}, false, Deps{Network: pl, Vault: v})
	s, err := next.Adopt(context.Background(), Parked{ID: id, Caller: tester, Snapshot: snap}, time.Time{}, time.Time{})
	if err != nil || !s.Network {
		t.Fatalf("Adopt: %+v, %v", s, err)
	}
	h := egresstest.Hash
	r := cell(t, next, id, `auth(os.environ["GITHUB_TOKEN"]), os.environ["GITHUB_TOKEN"] != old, get("http://other.test/")[:8]`)
	want := "('1 " + h("Bearer "+sessionSecret) + " " + h("") + " " + h("") + "', True, 'refused:')"
	if !r.Resumed || result(r) != want {
		t.Errorf("the adopted session: resumed %v, %s (%s), want %s", r.Resumed, result(r), r.Error, want)
	}
	if !slices.ContainsFunc(r.NetworkEvents, isLateLookup) {
		t.Errorf("the adopted session's first cell lacks the lookup refused after the last cell before the shutdown: %+v",
			r.NetworkEvents)
	}
	if !slices.ContainsFunc(r.NetworkEvents, isHeldEnd) {
		t.Errorf("the adopted session's first cell lacks the end of the connection it held at the shutdown: %+v",
			r.NetworkEvents)
	}
}

// isHeldEnd reports whether ev is the end of a connection to the test
// host's HoldPort, cut as its session's interpreter stopped.
func isHeldEnd(ev egress.Event) bool {
	return ev.Proto == "tcp" && ev.Host == "allowed.test" && ev.Port == egresstest.HoldPort && ev.Reason == egress.ReasonClosed
}

// TestSessionNetworkFailedHibernation: a session whose hibernation fails
// once its connections were cut stays awake with its network: its next
// cell reaches the allowed host through a new egress, keeps its
// variables, and has the event of the connection the attempt cut.
func TestSessionNetworkFailedHibernation(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlanner(t, w)
	v := newVault(t)
	v.set(func(v *memVault) { v.failBegin = errors.New("the store is full") })
	svc := newServiceDeps(t, Config{HibernateAfter: 100 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, false,
		Deps{Network: pl, Vault: v})
	id := newSession(t, svc, Request{Network: true, NetworkAllow: []string{"allowed.test"}})
	cell(t, svc, id, pyGet+`import socket
held = socket.create_connection(("allowed.test", `+strconv.Itoa(egresstest.HoldPort)+`), timeout=10)`)
	waitFor(t, 10*time.Second, "a hibernation was tried", func() bool { return svc.Stats().HibernateFailed > 0 })
	r := cell(t, svc, id, `get("http://allowed.test/"), held.recv(1)`)
	if result(r) != "('hello allowed.test', b'')" || r.Resumed {
		t.Errorf("the session after its failed hibernation: %s (%s), resumed %v; want the allowed host's answer, "+
			"and its held connection closed", result(r), r.Error, r.Resumed)
	}
	if !slices.ContainsFunc(r.NetworkEvents, isHeldEnd) {
		t.Errorf("the cell after the failed hibernation lacks the end of the connection it cut: %+v", r.NetworkEvents)
	}

	// Its retry saves with the network open: a failure that comes back at
	// every attempt would otherwise cut its connections each time.
	cell(t, svc, id, `held = socket.create_connection(("allowed.test", `+strconv.Itoa(egresstest.HoldPort)+`), timeout=10)`)
	failed := svc.Stats().HibernateFailed
	s := live(t, svc, id)
	s.mu.Lock()
	s.hibRetry = time.Time{} // due now, not in 30 s
	s.mu.Unlock()
	waitFor(t, 10*time.Second, "a second hibernation was tried", func() bool { return svc.Stats().HibernateFailed > failed })
	if r := cell(t, svc, id, `import select
"open" if not select.select([held], [], [], 0)[0] else held.recv(1)`); result(r) != "'open'" {
		t.Errorf("the connection held across a retried hibernation that failed: %s (%s), want it still open", result(r), r.Error)
	}
}

// isLateLookup reports whether ev is the refused lookup of late.test.
func isLateLookup(ev egress.Event) bool {
	return ev.Proto == "dns" && ev.Host == "late.test" && ev.Verdict == egress.VerdictDeny
}

// TestSessionSecretRemovedWhileLive: once the operator removes a secret
// (SIGHUP), a live session that uses it has its egress closed within a
// reaper tick, so its requests fail from then on; a restart is refused
// (400) and the session keeps its interpreter.
func TestSessionSecretRemovedWhileLive(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, cat := netPlanner(t, w)
	svc := newServiceDeps(t, Config{ReapInterval: 20 * time.Millisecond}, false, Deps{Network: pl})
	id := newSession(t, svc, Request{Network: true, Secrets: []string{"GITHUB_TOKEN"}})
	cell(t, svc, id, pyAuth+"x = 1")
	h := egresstest.Hash
	if r := cell(t, svc, id, `auth(os.environ["GITHUB_TOKEN"])`); result(r) != "'1 "+h("Bearer "+sessionSecret)+" "+h("")+" "+h("")+"'" {
		t.Fatalf("before the removal the host received %s (%s)", result(r), r.Error)
	}
	cat.Store(&egress.Catalog{})
	waitFor(t, 5*time.Second, "the session's egress closed", func() bool { return !kernelOf(t, svc, id).hasEgress() })
	if r := cell(t, svc, id, `auth(os.environ["GITHUB_TOKEN"])`); r.ErrorType == "" {
		t.Errorf("after the removal the host answered %s", result(r))
	}
	_, err := svc.Restart(context.Background(), live(t, svc, id))
	if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("a restart after the removal: %v, want ErrInvalid naming the secret", err)
	}
	if r := cell(t, svc, id, "x"); result(r) != "1" {
		t.Errorf("after the refused restart x = %q, want the same interpreter's 1", result(r))
	}
}

// TestSessionNetworkQuotaPerLife: the operator's byte quota is the
// session's for its whole life: a download past it cuts the session's
// network (the next request fails too), and a restart does not give it
// a fresh quota.
func TestSessionNetworkQuotaPerLife(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlannerLimits(t, w, egress.Limits{ConnectTimeout: 3 * time.Second, BytesIn: 1 << 20})
	svc := newServiceDeps(t, Config{}, false, Deps{Network: pl})
	id := newSession(t, svc, Request{Network: true, NetworkAllow: []string{"allowed.test"}})
	cell(t, svc, id, pyGet)
	if r := cell(t, svc, id, `get("http://allowed.test/")`); result(r) != "'hello allowed.test'" {
		t.Fatalf("within the quota: %s", result(r))
	}
	if r := cell(t, svc, id, `len(get("http://allowed.test/big"))`); result(r) == "4194304" {
		t.Fatalf("a 4 MiB download went through a 1 MiB quota")
	}
	if r := cell(t, svc, id, `get("http://allowed.test/")`); !strings.HasPrefix(result(r), "'refused: ") {
		t.Errorf("after the quota was spent: %s", result(r))
	}
	if _, err := svc.Restart(context.Background(), live(t, svc, id)); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	cell(t, svc, id, pyGet)
	if r := cell(t, svc, id, `get("http://allowed.test/")`); !strings.HasPrefix(result(r), "'refused: ") {
		t.Errorf("after a restart the spent quota was fresh again: %s", result(r))
	}
}
