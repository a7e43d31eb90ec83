package sessions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestShutdownParksIdleSessions: at shutdown an idle session is saved and
// handed over (OnPark), a busy one ends; a new service adopts the saved
// one under the same id, hibernated, and its first cell finds its
// variables and files and counts on from its last cell. A snapshot that
// is not that session's hibernation is not adopted.
func TestShutdownParksIdleSessions(t *testing.T) {
	v := newVault(t)
	var mu sync.Mutex
	var parked []Parked
	ended := map[string]bool{}
	deps := Deps{Vault: v,
		OnPark: func(p Parked) { mu.Lock(); parked = append(parked, p); mu.Unlock() },
		OnEnd:  func(id string, shutdown bool) { mu.Lock(); ended[id] = shutdown; mu.Unlock() }}
	svc := newServiceDeps(t, Config{InterruptGrace: 200 * time.Millisecond}, true, deps)
	idle := newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, idle, "x = 'kept'\nopen('f.txt', 'w').write('file')")
	info := live(t, svc, idle).Info()
	busy := newSession(t, svc, Request{Caller: "alice"})
	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = executeCell(context.Background(), svc, busy, CellRequest{Code: "import time; time.sleep(60)", Timeout: time.Minute})
	}()
	<-started
	waitFor(t, 10*time.Second, "the long cell runs", func() bool { return live(t, svc, busy).Info().State == Busy })
	svc.Close()
	svc.Wait()
	mu.Lock()
	got := append([]Parked(nil), parked...)
	busyEnded, shut := ended[busy]
	mu.Unlock()
	if len(got) != 1 || got[0].ID != idle || got[0].Caller != "alice" || got[0].Snapshot == "" {
		t.Fatalf("parked at shutdown: %+v, want only the idle session", got)
	}
	if !busyEnded || !shut {
		t.Errorf("the busy session at shutdown: ended %v (shutdown %v), want ended", busyEnded, shut)
	}

	next := newServiceWith(t, Config{}, true, v)
	if _, err := next.Adopt(context.Background(), Parked{ID: "ses_other", Caller: "alice", Snapshot: got[0].Snapshot}, time.Time{}, time.Time{}); err == nil {
		t.Errorf("a snapshot adopted as another session's")
	}
	s, err := next.Adopt(context.Background(), got[0], info.CreatedAt, info.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != idle || s.State != Hibernated || s.Caller != "alice" || !s.ExpiresAt.Equal(info.ExpiresAt) || s.ExecutionCount != 1 {
		t.Fatalf("adopted: %+v", s)
	}
	r := cell(t, next, idle, "x, open('f.txt').read()")
	if result(r) != "('kept', 'file')" || !r.Resumed || r.ExecutionCount != 2 {
		t.Fatalf("the first cell after the restart: %q resumed=%v count=%d (%s)", result(r), r.Resumed, r.ExecutionCount, r.Stderr)
	}
	if n := len(v.ids()); n != 0 {
		t.Errorf("%d snapshots left after the resume", n)
	}
	if _, err := next.Lookup(busy); !errors.Is(err, ErrNotFound) {
		t.Errorf("the busy session after the restart: %v, want not found", err)
	}
}
