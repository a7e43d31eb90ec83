package sessions

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
)

// pyDial defines dial(n): how many of n connections to an address off
// every allow list (TEST-NET-1, never dialled) were refused.
const pyDial = `
import socket
def dial(n):
    refused = 0
    for _ in range(n):
        try:
            socket.create_connection(("192.0.2.99", 80), timeout=3).close()
        except OSError:
            refused += 1
    return refused
`

// TestSessionSecretEventsNotDropped: a payload that spends its
// interpreter's event budget (lookups of refused names, then refused
// connections) cannot hide a use of its secret: each injection is still
// told to the service (the server's metrics and audit) and in the cell's
// events; lookups have a budget of their own, and the events dropped are
// logged, with the session and its key, when the session's egress closes.
// Each injection goes to the audit trail (OnSecretEvent) with the
// session's id and key.
func TestSessionSecretEventsNotDropped(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlannerLimits(t, w, egress.Limits{ConnectTimeout: 3 * time.Second, MaxEvents: 10})
	var logs logBuffer
	var secret, refused, audited atomic.Int64
	var sid atomic.Value
	svc := newServiceDeps(t, Config{}, false, Deps{Network: pl, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		OnSecretEvent: func(id, owner string, ev egress.Event) {
			if id == sid.Load() && owner == tester && ev.Secret == "GITHUB_TOKEN" && ev.Host == "allowed.test" {
				audited.Add(1)
			}
		},
		OnNetworkEvent: func(ev egress.Event) {
			switch {
			case ev.Secret == "GITHUB_TOKEN" && ev.Verdict == egress.VerdictAllow:
				secret.Add(1)
			case ev.Proto == "tcp" && ev.Verdict == egress.VerdictDeny:
				refused.Add(1)
			}
		}})
	id := newSession(t, svc, Request{Network: true, NetworkAllow: []string{"allowed.test"}, Secrets: []string{"GITHUB_TOKEN"}})
	sid.Store(id)
	cell(t, svc, id, pyAuth+pyDial)
	if r := cell(t, svc, id, `
import socket
for i in range(40):
    try: socket.getaddrinfo("n%d.example.invalid" % i, 80)
    except Exception: pass
`); r.Error != "" {
		t.Fatalf("the lookups: %s", r.Error)
	}
	if r := cell(t, svc, id, `dial(3)`); result(r) != "3" {
		t.Fatalf("3 connections to an address off the list: %s refused (%s)", result(r), r.Error)
	}
	waitFor(t, 5*time.Second, "the refused connections told", func() bool { return refused.Load() == 3 })
	cell(t, svc, id, `dial(12)`)
	r := cell(t, svc, id, `auth(os.environ["GITHUB_TOKEN"])`)
	r2 := cell(t, svc, id, `auth(os.environ["GITHUB_TOKEN"])`)
	waitFor(t, 5*time.Second, "both injections told", func() bool { return secret.Load() == 2 })
	inCells := 0
	for _, ev := range append(r.NetworkEvents, append(r2.NetworkEvents, cell(t, svc, id, "1").NetworkEvents...)...) {
		if ev.Secret == "GITHUB_TOKEN" {
			inCells++
		}
	}
	if audited.Load() != 2 {
		t.Errorf("%d of the 2 injections went to the audit trail with the session and its key", audited.Load())
	}
	if inCells != 2 {
		t.Errorf("the cells carried %d of the 2 injections", inCells)
	}
	svc.Delete(live(t, svc, id))
	waitFor(t, 5*time.Second, "the dropped events logged", func() bool {
		return strings.Contains(logs.String(), `"events_dropped"`)
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"events_dropped"`) && !strings.Contains(line, `"caller":"`+tester+`"`) {
			t.Errorf("the line of the dropped events does not name the key: %s", line)
		}
	}
}
