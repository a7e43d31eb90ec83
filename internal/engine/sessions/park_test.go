package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/snapshot"
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
		OnPark: func(p Parked) error { mu.Lock(); parked = append(parked, p); mu.Unlock(); return nil },
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

// parkRecorder is a service's Deps.OnPark that remembers the snapshot of
// each session parked.
type parkRecorder struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *parkRecorder) park(p Parked) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]string{}
	}
	r.m[p.ID] = p.Snapshot
	return nil
}

func (r *parkRecorder) snapshot(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[id]
	return s, ok
}

// adoptedCell has a new service keeping its snapshots in v adopt p, and
// returns what code gives in it; the cell must resume it.
func adoptedCell(t *testing.T, v Vault, p Parked, code string) string {
	t.Helper()
	next := newServiceWith(t, Config{}, false, v)
	if _, err := next.Adopt(context.Background(), p, time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	r := cell(t, next, p.ID, code)
	if !r.Resumed {
		t.Errorf("the first cell after the adoption did not resume the session")
	}
	return result(r)
}

// closeWithin closes svc and fails the test unless every session is
// parked or ended within d (the engine's drain would abort them then).
func closeWithin(t *testing.T, svc *Service, d time.Duration) {
	t.Helper()
	svc.Close()
	done := make(chan struct{})
	go func() { svc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("the shutdown did not end within %s", d)
		svc.Abort()
		<-done
	}
}

// TestStalledSaveDoesNotLoseOthersAtShutdown: one key's session whose
// state stalls its save (a hibernation worker is saving it when the
// shutdown comes) neither holds the shutdown past ParkTimeout nor keeps
// another key's idle session from being parked; the next run has that
// session back with its variables.
func TestStalledSaveDoesNotLoseOthersAtShutdown(t *testing.T) {
	v := newVault(t)
	var rec parkRecorder
	svc := newServiceDeps(t, Config{HibernateAfter: 300 * time.Millisecond, ReapInterval: 50 * time.Millisecond,
		SaveTimeout: 20 * time.Second, Hibernations: 1, ParkTimeout: 2 * time.Second, InterruptGrace: 500 * time.Millisecond},
		false, Deps{Vault: v, OnPark: rec.park})
	alice := newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, alice, "import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(3600)\nx = Slow()")
	waitFor(t, 10*time.Second, "alice's save began", func() bool { return live(t, svc, alice).Info().State == Busy })
	bob := newSession(t, svc, Request{Caller: "bob", IdleTimeout: time.Hour})
	cell(t, svc, bob, "y = 1")
	start := time.Now()
	closeWithin(t, svc, 8*time.Second) // ParkTimeout, the grace and some room: not SaveTimeout
	t.Logf("shutdown took %s", time.Since(start))
	snap, ok := rec.snapshot(bob)
	if !ok {
		t.Fatalf("bob's idle session was not parked behind alice's stalled save")
	}
	if _, ok := rec.snapshot(alice); ok {
		t.Errorf("alice's session, whose state never saved, was parked")
	}
	if got := adoptedCell(t, v, Parked{ID: bob, Caller: "bob", Snapshot: snap}, "y"); got != "1" {
		t.Errorf("bob's session after the restart: y is %q", got)
	}
}

// TestManyStalledSavesOfOneKeyAtShutdown: a key with more sessions whose
// saves stall than the shutdown saves at once still leaves another key's
// idle session its turn: it is parked.
func TestManyStalledSavesOfOneKeyAtShutdown(t *testing.T) {
	v := newVault(t)
	var rec parkRecorder
	svc := newServiceDeps(t, Config{ParkTimeout: 6 * time.Second, InterruptGrace: 500 * time.Millisecond},
		false, Deps{Vault: v, OnPark: rec.park})
	for range 2 * parkers {
		id := newSession(t, svc, Request{Caller: "alice"})
		cell(t, svc, id, "import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(3600)\nx = Slow()")
	}
	bob := newSession(t, svc, Request{Caller: "bob"})
	cell(t, svc, bob, "y = 1")
	closeWithin(t, svc, 15*time.Second)
	if _, ok := rec.snapshot(bob); !ok {
		t.Errorf("bob's idle session was not parked behind %d of alice's stalling saves", 2*parkers)
	}
}

// TestResumeAtShutdownKeepsParkedSnapshot: a hibernated session whose
// resume is under way when the shutdown comes is parked under its
// snapshot, which the resume, ending later, leaves alone (and its kernel
// does not hold the shutdown): the next run resumes it.
func TestResumeAtShutdownKeepsParkedSnapshot(t *testing.T) {
	v := newVault(t)
	var rec parkRecorder
	svc := newServiceDeps(t, Config{HibernateAfter: 300 * time.Millisecond, ReapInterval: 50 * time.Millisecond},
		false, Deps{Vault: v, OnPark: rec.park})
	id := newSession(t, svc, Request{Caller: "alice", IdleTimeout: time.Hour})
	cell(t, svc, id, "import time\nclass Z:\n    def __reduce__(self):\n        return (time.sleep, (3,))\nx = Z()\ny = 7")
	hibernated(t, svc, id)
	s := live(t, svc, id)
	done := make(chan error, 1)
	go func() {
		_, err := svc.ExecuteCell(context.Background(), s, CellRequest{Code: "y", EvalLastExpr: true, Timeout: 20 * time.Second})
		done <- err
	}()
	waitFor(t, 5*time.Second, "the resume began", func() bool { return s.Info().State == Busy })
	closeWithin(t, svc, 10*time.Second)
	if err := <-done; !errors.Is(err, run.ErrUnavailable) {
		t.Errorf("the cell that began the resume: %v, want ErrUnavailable (the session was saved for the next start)", err)
	}
	snap, ok := rec.snapshot(id)
	if !ok || !slices.Contains(v.ids(), snap) {
		t.Fatalf("parked %v under %q; stored: %v", ok, snap, v.ids())
	}
	if got := adoptedCell(t, v, Parked{ID: id, Caller: "alice", Snapshot: snap}, "y"); got != "7" {
		t.Errorf("the session after the restart: y is %q", got)
	}
}

// TestFailedAdoptionDeletesSnapshot: a parked session the next run
// cannot take back (here its snapshot, over a lowered cap, does not read)
// ends with its snapshot deleted, not left to hold the key's quota; one
// whose snapshot does not verify as its own is not deleted (it may be
// another key's).
func TestFailedAdoptionDeletesSnapshot(t *testing.T) {
	v := newVault(t)
	id, snap := parkedOne(t, v, "x = 1")
	next := newServiceWith(t, Config{}, false, v)
	if _, err := next.Adopt(context.Background(), Parked{ID: id, Caller: "bob", Snapshot: snap}, time.Time{}, time.Time{}); err == nil {
		t.Fatal("alice's parked snapshot adopted for bob")
	}
	if len(v.ids()) != 1 {
		t.Fatalf("a snapshot that did not verify for the entry's owner was deleted")
	}
	v.set(func(v *memVault) { v.failOpen = fmt.Errorf("%w: over the cap of 1 MiB", snapshot.ErrTooLarge) })
	if _, err := next.Adopt(context.Background(), Parked{ID: id, Caller: "alice", Snapshot: snap}, time.Time{}, time.Time{}); err == nil {
		t.Fatal("adopted from a snapshot that does not read")
	}
	if n := len(v.ids()); n != 0 {
		t.Errorf("%d snapshots left after a failed adoption, want its snapshot deleted", n)
	}
}

// TestAdoptionWaitsOutAStoreThatFails: a parked session whose snapshot
// cannot be read at the next start (the store times out, the node has no
// room to read it) is not adopted and says to try again later
// (run.ErrUnavailable), its only snapshot kept; once the store answers,
// it is adopted with its state.
func TestAdoptionWaitsOutAStoreThatFails(t *testing.T) {
	v := newVault(t)
	id, snap := parkedOne(t, v, "x = 'parked'")
	next := newServiceWith(t, Config{}, false, v)
	p := Parked{ID: id, Caller: "alice", Snapshot: snap}
	for _, transient := range []error{
		fmt.Errorf("engine: reading snapshot %s: %w", snap, context.DeadlineExceeded),
		fmt.Errorf("engine: reading snapshot %s: %w: no room to read the snapshot", snap, run.ErrUnavailable),
	} {
		v.set(func(v *memVault) { v.failOpen = transient })
		_, err := next.Adopt(context.Background(), p, time.Time{}, time.Time{})
		if !errors.Is(err, run.ErrUnavailable) {
			t.Errorf("adopting while the store fails (%v): %v, want ErrUnavailable", transient, err)
		}
		if ids := v.ids(); len(ids) != 1 || ids[0] != snap {
			t.Fatalf("after an adoption the store failed (%v): snapshots %v, want the parked one kept", transient, ids)
		}
	}
	v.set(func(v *memVault) { v.failOpen = nil })
	if _, err := next.Adopt(context.Background(), p, time.Time{}, time.Time{}); err != nil {
		t.Fatalf("adopting once the store answers: %v", err)
	}
	if r := cell(t, next, id, "x"); result(r) != "'parked'" || !r.Resumed {
		t.Errorf("the adopted session: %q resumed=%v", result(r), r.Resumed)
	}
}

// TestStallingSavesGiveTheirTurnsBack: a key whose sessions stall their
// saves, as many as the shutdown saves at once and never failing a
// hibernation (so not ranked last), does not hold every turn until
// ParkTimeout: each save has its share of the time, so another key's
// idle sessions queued behind them are all parked.
func TestStallingSavesGiveTheirTurnsBack(t *testing.T) {
	v := newVault(t)
	var rec parkRecorder
	svc := newServiceDeps(t, Config{ParkTimeout: 10 * time.Second, InterruptGrace: 300 * time.Millisecond},
		false, Deps{Vault: v, OnPark: rec.park})
	for range parkers {
		id := newSession(t, svc, Request{Caller: "alice"})
		cell(t, svc, id, "import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(3600)\nx = Slow()")
	}
	var bob []string
	for range 6 {
		id := newSession(t, svc, Request{Caller: "bob"})
		cell(t, svc, id, "y = 1")
		bob = append(bob, id)
	}
	closeWithin(t, svc, 20*time.Second)
	lost := 0
	for _, id := range bob {
		if _, ok := rec.snapshot(id); !ok {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of bob's 6 idle sessions ended unsaved behind alice's %d stalling saves", lost, parkers)
	}
}

// parkedOne parks, at the shutdown of a service keeping its snapshots in
// v, an idle session of alice's that ran code, and returns its id and
// snapshot: the only one v holds.
func parkedOne(t *testing.T, v *memVault, code string) (id, snap string) {
	t.Helper()
	var rec parkRecorder
	svc := newServiceDeps(t, Config{}, false, Deps{Vault: v, OnPark: rec.park})
	id = newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, id, code)
	closeWithin(t, svc, 10*time.Second)
	snap, ok := rec.snapshot(id)
	if !ok || len(v.ids()) != 1 {
		t.Fatalf("parked %v, %d snapshots stored", ok, len(v.ids()))
	}
	return id, snap
}

// TestSessionWithWorkspaceIsNotParked: a session with a workspace is not
// kept for the next start (it would be adopted without its mount); it
// ends, and its end commits the workspace. Nothing is saved for it.
func TestSessionWithWorkspaceIsNotParked(t *testing.T) {
	v := newVault(t)
	var parked []Parked
	s := &Live{id: "ses_ws", caller: "alice", req: Request{Caller: "alice", Workspace: "nb"}, asleep: "snap_x", release: func() {}}
	m := &Service{deps: Deps{Vault: v, OnPark: func(p Parked) error { parked = append(parked, p); return nil }}, log: slog.New(slog.DiscardHandler),
		live: map[string]*Live{s.id: s}, parked: map[string]Session{}}
	if m.park(context.Background(), s) {
		t.Fatal("a session with a workspace was parked")
	}
	if len(parked) != 0 {
		t.Errorf("parked %v: want nothing kept for it", parked)
	}
}
