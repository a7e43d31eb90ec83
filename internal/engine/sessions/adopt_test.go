package sessions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// TestAdoptionWaitsForNoEnvironment: a node whose base environment is
// still being built takes its parked session back at once, hibernated;
// a call on it while the environment builds waits for it (and a caller
// that gives up first is told to retry, the session still hibernated);
// once it is built the session resumes with its variables. A parked
// session ended while its environment builds holds no lease of it.
func TestAdoptionWaitsForNoEnvironment(t *testing.T) {
	v := newVault(t)
	var rec parkRecorder
	built := newGatedEnvs()
	close(built.gate)
	svc := newServiceDeps(t, Config{InterruptGrace: 200 * time.Millisecond}, false, Deps{Vault: v, Envs: built, OnPark: rec.park})
	kept := newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, kept, "x = 41")
	dropped := newSession(t, svc, Request{Caller: "alice"})
	closeWithin(t, svc, 10*time.Second)
	parked := map[string]Parked{}
	for _, id := range []string{kept, dropped} {
		snap, ok := rec.snapshot(id)
		if !ok {
			t.Fatalf("session %s was not parked at shutdown", id)
		}
		parked[id] = Parked{ID: id, Caller: "alice", Snapshot: snap}
	}

	building := newGatedEnvs()
	next := newServiceDeps(t, Config{}, false, Deps{Vault: v, Envs: building})
	for _, id := range []string{kept, dropped} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		s, err := next.Adopt(ctx, parked[id], time.Time{}, time.Time{})
		cancel()
		if err != nil || s.State != Hibernated {
			t.Fatalf("adopting %s while the environment builds: %+v, %v (after %s)", id, s, err, time.Since(start))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := executeCell(ctx, next, kept, CellRequest{Code: "x", EvalLastExpr: true, Timeout: 20 * time.Second})
	cancel()
	if !errors.Is(err, run.ErrUnavailable) {
		t.Errorf("a call that gave up while the environment builds: %v, want unavailable (retry)", err)
	}
	if st := live(t, next, kept).Info().State; st != Hibernated {
		t.Errorf("after that call the session is %s, want hibernated", st)
	}

	type answer struct {
		r   CellResult
		err error
	}
	calls := map[string]chan answer{}
	for _, id := range []string{kept, dropped} {
		calls[id] = make(chan answer, 1)
		go func() {
			r, err := executeCell(context.Background(), next, id, CellRequest{Code: "x + 1", EvalLastExpr: true, Timeout: 20 * time.Second})
			calls[id] <- answer{r, err}
		}()
	}
	waitFor(t, 10*time.Second, "both calls wait for the environment", func() bool { return building.waiting() == 2 })
	select {
	case a := <-calls[kept]:
		t.Fatalf("a call answered before the environment was built: %+v %v", a.r, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	next.Delete(live(t, next, dropped))
	close(building.gate)

	a := <-calls[kept]
	if a.err != nil || result(a.r) != "42" || !a.r.Resumed {
		t.Fatalf("the call once the environment was built: %q resumed=%v %v (%s)", result(a.r), a.r.Resumed, a.err, a.r.Stderr)
	}
	if a := <-calls[dropped]; !errors.Is(a.err, ErrEnded) {
		t.Errorf("a call on a session deleted while its environment built: %v, want ended", a.err)
	}
	if n := building.leased(); n != 1 {
		t.Errorf("%d leases of the environment held, want 1 (the resumed session's)", n)
	}
	next.Delete(live(t, next, kept))
	if n := building.leased(); n != 0 {
		t.Errorf("%d leases of the environment held after the sessions ended", n)
	}
}

// gatedEnvs is a base environment that is built once its gate is closed;
// its lease runs the bare interpreter. It counts the callers waiting for
// it and the leases held.
type gatedEnvs struct {
	gate chan struct{}

	mu          sync.Mutex
	wait, holds int
}

func newGatedEnvs() *gatedEnvs { return &gatedEnvs{gate: make(chan struct{})} }

func (g *gatedEnvs) Resolve(context.Context, run.Interpreter, []run.File, string, string) (pyenv.Needs, error) {
	return pyenv.Needs{}, nil
}

func (g *gatedEnvs) Acquire(ctx context.Context, in run.Interpreter, _ pyenv.Set, _ func(string)) (run.EnvLease, error) {
	g.mu.Lock()
	g.wait++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.wait--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds++
	return &gatedLease{g: g, python: in.Path}, nil
}

func (g *gatedEnvs) Base() pyenv.Set { return pyenv.Set{{Name: "slowbase", Spec: "slowbase"}} }

func (g *gatedEnvs) Remember(run.Interpreter, []run.File, string, *pyenv.Analysis) {}

func (g *gatedEnvs) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wait
}

func (g *gatedEnvs) leased() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holds
}

type gatedLease struct {
	g      *gatedEnvs
	python string
	once   sync.Once
}

func (l *gatedLease) Python() string    { return l.python }
func (l *gatedLease) Dirs() []string    { return nil }
func (l *gatedLease) Skipped() []string { return nil }
func (l *gatedLease) Release() {
	l.once.Do(func() {
		l.g.mu.Lock()
		l.g.holds--
		l.g.mu.Unlock()
	})
}
