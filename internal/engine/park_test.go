package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// TestParkedSessionsDuringTheDrain: while a node shuts down, a session
// its shutdown already saved for the next start answers its owner "retry
// later" (ErrUnavailable) and is listed, hibernated; another key still
// gets "not found" and does not see it.
func TestParkedSessionsDuringTheDrain(t *testing.T) {
	jails := runtest.Jails(t)
	parked := make(chan ParkedSession, 1)
	release := make(chan struct{})
	e := startWith(t, Config{}, Deps{Runner: jails, Jails: jails, OnSessionPark: func(p ParkedSession) error {
		parked <- p
		<-release // the drain goes on while the test looks
		return nil
	}})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- e.eng.Close(cctx)
	}()
	select {
	case p := <-parked:
		if p.ID != s.ID {
			t.Fatalf("parked %+v, want %s", p, s.ID)
		}
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("the idle session was not parked")
	}
	_, getErr := e.eng.GetSession(ctx, s.ID, a)
	_, cellErr := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "x"})
	_, otherErr := e.eng.GetSession(ctx, s.ID, b)
	listed, others := e.eng.ListSessions(ctx, a), e.eng.ListSessions(ctx, b)
	close(release)
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if !errors.Is(getErr, ErrUnavailable) || !errors.Is(cellErr, ErrUnavailable) {
		t.Errorf("the owner's calls on its parked session during the drain: get %v, cell %v; want ErrUnavailable", getErr, cellErr)
	}
	if !errors.Is(otherErr, ErrSessionNotFound) {
		t.Errorf("another key's call on it: %v, want ErrSessionNotFound", otherErr)
	}
	if len(listed) != 1 || listed[0].ID != s.ID || listed[0].State != SessionHibernated {
		t.Errorf("the owner's listing during the drain: %+v, want its session, hibernated", listed)
	}
	if len(others) != 0 {
		t.Errorf("another key's listing: %+v", others)
	}
}
