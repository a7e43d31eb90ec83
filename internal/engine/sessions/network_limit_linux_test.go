package sessions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
)

// TestSessionNetworkLimitForLife: once the connection limit cut a
// session's network it has none for the rest of its life: not after a
// restart, and not after it was parked at shutdown and adopted by the
// next run (its hibernation header carries the limit and the bytes).
func TestSessionNetworkLimitForLife(t *testing.T) {
	if egresstest.RanIsolated(t) {
		return
	}
	w := egresstest.New(t)
	pl, _ := netPlannerLimits(t, w, egress.Limits{ConnectTimeout: 3 * time.Second, MaxConns: 2})
	v := newVault(t)
	var rec parkRecorder
	svc := newServiceDeps(t, Config{InterruptGrace: 200 * time.Millisecond}, false, Deps{Network: pl, Vault: v, OnPark: rec.park})
	id := newSession(t, svc, Request{Network: true})
	if r := cell(t, svc, id, pyGet+`get("http://allowed.test/")`); !strings.Contains(result(r), "allowed.test") {
		t.Fatalf("before the limit allowed.test answered %s (%s)", result(r), r.Error)
	}
	cell(t, svc, id, `
import socket
ss = []
for _ in range(4):
    try:
        ss.append(socket.create_connection(("allowed.test", 80), timeout=3))
    except OSError:
        pass
[s.close() for s in ss]`)
	refused := func(svc *Service, what string) {
		t.Helper()
		if r := cell(t, svc, id, pyGet+`get("http://allowed.test/")`); !strings.HasPrefix(result(r), "'refused: ") {
			t.Errorf("%s allowed.test answered %s (%s)", what, result(r), r.Error)
		}
	}
	refused(svc, "after the connection limit")
	if _, err := svc.Restart(context.Background(), live(t, svc, id)); err != nil {
		t.Fatal(err)
	}
	refused(svc, "after a restart")
	closeWithin(t, svc, 10*time.Second)
	snap, ok := rec.snapshot(id)
	if !ok {
		t.Fatal("the session was not parked at shutdown")
	}
	next := newServiceDeps(t, Config{}, false, Deps{Network: pl, Vault: v})
	if _, err := next.Adopt(context.Background(), Parked{ID: id, Caller: tester, Snapshot: snap}, time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	refused(next, "after the adoption")
}
