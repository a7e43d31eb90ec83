package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/engine/sessions"
)

// savedSnapshot runs code in a new session of c, snapshots it and ends
// the session; it returns the snapshot's id.
func savedSnapshot(t *testing.T, e *env, c Caller, code string) string {
	t.Helper()
	ctx := context.Background()
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: c.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.eng.ExecuteCell(ctx, s.ID, c, CellRequest{Code: code}); err != nil || r.ErrorType != "" {
		t.Fatalf("cell: %v %+v", err, r)
	}
	saved, err := e.eng.SnapshotSession(ctx, s.ID, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.eng.DeleteSession(ctx, s.ID, c); err != nil {
		t.Fatal(err)
	}
	return saved.ID
}

// TestRestoresOfOneKeyDoNotStarveAnother: key a restoring, twice at once,
// a snapshot whose state stalls its load keeps neither the node's reads
// nor key b waiting: b's restore of its own snapshot goes ahead at once,
// and a's stalled loads end within the load's own timeout, not
// SaveTimeout.
func TestRestoresOfOneKeyDoNotStarveAnother(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{Sessions: SessionConfig{SaveTimeout: time.Minute, InterruptGrace: 500 * time.Millisecond}},
		Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	stall := savedSnapshot(t, e, a, "import time\nclass Stall:\n    def __reduce__(self):\n        return (time.sleep, (3600,))\nx = Stall()")
	fine := savedSnapshot(t, e, b, "y = 1")
	var wg sync.WaitGroup
	start := time.Now()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, FromSnapshot: stall}); err == nil {
				t.Errorf("a's stalling snapshot restored")
			}
		}()
	}
	time.Sleep(2 * time.Second) // both of a's loads are under way
	bctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	s, err := e.eng.CreateSession(bctx, SessionRequest{Caller: b.Name, FromSnapshot: fine})
	if err != nil {
		t.Fatalf("b's restore while a's loads stall: %v", err)
	}
	r, err := e.eng.ExecuteCell(ctx, s.ID, b, CellRequest{Code: "y", EvalLastExpr: true})
	if err != nil || r.Result == nil || *r.Result != "1" {
		t.Errorf("b's restored session: %+v, %v", r, err)
	}
	wg.Wait()
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a's stalled loads took %s to end, want the load timeout (about 10 s)", d)
	}
}

// TestHibernationsLeaveTheKeysQuota: a key whose session hibernated may
// still make as many snapshots as its quota says, and a 429 counts only
// the snapshots it can list and delete.
func TestHibernationsLeaveTheKeysQuota(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{Sessions: SessionConfig{HibernateAfter: 300 * time.Millisecond, ReapInterval: 50 * time.Millisecond},
		Snapshots: SnapshotConfig{QuotaCount: 1}}, Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a := Caller{Name: "a"}
	asleep, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := e.eng.GetSession(ctx, asleep.ID, a)
		if err == nil && got.State == sessions.Hibernated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated: %+v %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20, IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.SnapshotSession(ctx, s.ID, a); err != nil {
		t.Fatalf("a's first snapshot, one session hibernated: %v", err)
	}
	_, err = e.eng.SnapshotSession(ctx, s.ID, a)
	list, lerr := e.eng.ListSnapshots(ctx, a)
	if !errors.Is(err, ErrSnapshotQuota) || lerr != nil || len(list) != 1 {
		t.Errorf("a's second snapshot: %v; listed %d (%v); want the 429 with the one snapshot a can delete", err, len(list), lerr)
	}
}
