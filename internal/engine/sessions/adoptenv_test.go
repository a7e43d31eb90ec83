package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// adoptParked parks, at the shutdown of a service whose environments are
// built at once, a session of req that set x = 41, and has a new service
// of sc keeping its snapshots in the same vault, its environments from
// envs, adopt it. It returns the new service and the session's id.
func adoptParked(t *testing.T, sc Config, req Request, envs run.Environments) (*Service, *memVault, string) {
	t.Helper()
	v := newVault(t)
	var rec parkRecorder
	built := newGatedEnvs()
	close(built.gate)
	svc := newServiceDeps(t, Config{InterruptGrace: 200 * time.Millisecond}, false,
		Deps{Vault: v, Envs: &requiringEnvs{gatedEnvs: built}, OnPark: rec.park})
	id := newSession(t, svc, req)
	cell(t, svc, id, "x = 41")
	closeWithin(t, svc, 10*time.Second)
	snap, ok := rec.snapshot(id)
	if !ok {
		t.Fatalf("session %s was not parked at shutdown", id)
	}
	next := newServiceDeps(t, sc, false, Deps{Vault: v, Envs: envs})
	if s, err := next.Adopt(context.Background(), Parked{ID: id, Caller: req.Caller, Snapshot: snap}, time.Time{}, time.Time{}); err != nil || s.State != Hibernated {
		t.Fatalf("adopting %s: %+v, %v", id, s, err)
	}
	return next, v, id
}

// TestIdleTimeoutWaitsForTheEnvironment: an adopted session whose first
// call waits for its environment longer than its idle timeout is not
// ended meanwhile; the call resumes it with its variables once the
// environment is built, and the idle timeout counts from then.
func TestIdleTimeoutWaitsForTheEnvironment(t *testing.T) {
	building := newGatedEnvs()
	sc := Config{ReapInterval: 50 * time.Millisecond}
	svc, v, id := adoptParked(t, sc, Request{Caller: "alice", IdleTimeout: 2 * time.Second}, building)

	type answer struct {
		r   CellResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := executeCell(context.Background(), svc, id, CellRequest{Code: "x + 1", EvalLastExpr: true, Timeout: 20 * time.Second})
		done <- answer{r, err}
	}()
	waitFor(t, 10*time.Second, "the call waits for the environment", func() bool { return building.waiting() == 1 })
	time.Sleep(3 * time.Second) // past the idle timeout, with reaps every 50ms
	if _, err := svc.Lookup(id); err != nil {
		t.Fatalf("the session ended while its first call waited for its environment: %v", err)
	}
	if n := v.count(); n != 1 {
		t.Fatalf("%d snapshots stored while the call waits, want its hibernation's", n)
	}
	close(building.gate)
	a := <-done
	if a.err != nil || result(a.r) != "42" || !a.r.Resumed {
		t.Fatalf("the call once the environment was built: %q resumed=%v %v", result(a.r), a.r.Resumed, a.err)
	}
	if _, err := svc.Lookup(id); err != nil {
		t.Fatalf("the session ended at once after its call: %v", err)
	}
}

// TestCallerContextBoundsTheEnvironmentWait: a snapshot, a file call or a
// restart of an adopted session waits for its environment only as long as
// its caller's context; it answers retry-later and the session stays
// hibernated, free for the next call.
func TestCallerContextBoundsTheEnvironmentWait(t *testing.T) {
	building := newGatedEnvs()
	svc, _, id := adoptParked(t, Config{}, Request{Caller: "alice"}, building)
	calls := map[string]func(ctx context.Context, s *Live) error{
		"snapshot": func(ctx context.Context, s *Live) error { _, err := svc.Snapshot(ctx, s); return err },
		"fork":     func(ctx context.Context, s *Live) error { _, err := svc.Fork(ctx, s); return err },
		"list":     func(ctx context.Context, s *Live) error { _, err := svc.ListFiles(ctx, s); return err },
		"read":     func(ctx context.Context, s *Live) error { _, err := svc.ReadFile(ctx, s, "a.txt"); return err },
		"put":      func(ctx context.Context, s *Live) error { return svc.PutFile(ctx, s, "a.txt", []byte("a")) },
		"restart":  func(ctx context.Context, s *Live) error { _, err := svc.Restart(ctx, s); return err },
		"port":     func(ctx context.Context, s *Live) error { _, err := svc.DialPort(ctx, s, 8000); return err },
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		answered := make(chan error, 1)
		go func() { answered <- call(ctx, live(t, svc, id)) }()
		select {
		case err := <-answered:
			if !errors.Is(err, run.ErrUnavailable) {
				t.Errorf("%s with a 300ms context while the environment builds: %v, want unavailable", name, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s with a 300ms context still waits for the environment after 3s", name)
		}
		cancel()
		if st := live(t, svc, id).Info().State; st != Hibernated {
			t.Errorf("after %s the session is %s, want hibernated", name, st)
		}
	}
	close(building.gate)
	if r := cell(t, svc, id, "x + 1"); result(r) != "42" || !r.Resumed {
		t.Errorf("the cell once the environment was built: %q resumed=%v", result(r), r.Resumed)
	}
}

// TestEnvironmentThatNoLongerBuilds: an adopted session whose
// requirements no longer install answers each call as a create would
// (invalid, install_error), stays hibernated, and is ended at its idle
// timeout counted from its adoption, however often it is called, its
// snapshot deleted. Any other cause answers retry-later without naming
// the server's paths.
func TestEnvironmentThatNoLongerBuilds(t *testing.T) {
	built := newGatedEnvs()
	close(built.gate)
	envs := &requiringEnvs{gatedEnvs: built, fail: fmt.Errorf("%w: no such distribution: gone-pkg", pyenv.ErrInstall)}
	sc := Config{ReapInterval: 50 * time.Millisecond}
	svc, v, id := adoptParked(t, sc, Request{Caller: "alice", IdleTimeout: 2 * time.Second, Requirements: "gone-pkg"}, envs)
	adopted := time.Now()

	for i, at := range []time.Duration{0, time.Second, 1700 * time.Millisecond} {
		time.Sleep(time.Until(adopted.Add(at)))
		_, err := executeCell(context.Background(), svc, id, CellRequest{Code: "x", EvalLastExpr: true, Timeout: 20 * time.Second})
		if !errors.Is(err, run.ErrInvalid) || errors.Is(err, run.ErrUnavailable) ||
			!strings.Contains(err.Error(), run.ReasonInstallError) || !strings.Contains(err.Error(), "gone-pkg") {
			t.Errorf("call %d on a session whose requirements do not install: %v, want invalid install_error", i, err)
		}
	}

	envs.mu.Lock()
	envs.fail = errors.New("open /var/lib/pyexec/envs/.lock: permission denied")
	envs.mu.Unlock()
	_, err := executeCell(context.Background(), svc, id, CellRequest{Code: "x", EvalLastExpr: true, Timeout: 20 * time.Second})
	if !errors.Is(err, run.ErrUnavailable) || strings.Contains(err.Error(), "/var/lib") {
		t.Errorf("a call whose environment cannot be prepared: %v, want unavailable without the server's paths", err)
	}

	waitFor(t, time.Until(adopted.Add(3200*time.Millisecond)), "the session ends at its idle timeout from its adoption", func() bool {
		_, err := svc.Lookup(id)
		return err != nil
	})
	waitFor(t, 5*time.Second, "its snapshot deleted", func() bool { return v.count() == 0 })
	if n := envs.leased(); n != 0 {
		t.Errorf("%d environment leases held", n)
	}
}

// requiringEnvs resolves any requirements to a set of their own (so that
// a session has its own layer), and fails each Acquire of a set that
// has them with fail when set; the rest is gatedEnvs.
type requiringEnvs struct {
	*gatedEnvs
	fail error // under gatedEnvs.mu
}

func (r *requiringEnvs) Resolve(_ context.Context, _ run.Interpreter, _ []run.File, _, requirements string) (pyenv.Needs, error) {
	if requirements == "" {
		return pyenv.Needs{}, nil
	}
	return pyenv.Needs{Set: pyenv.Set{{Name: requirements, Spec: requirements}}}, nil
}

func (r *requiringEnvs) Acquire(ctx context.Context, in run.Interpreter, set pyenv.Set, progress func(string)) (run.EnvLease, error) {
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail != nil && len(set) > len(r.Base()) {
		return nil, fail
	}
	return r.gatedEnvs.Acquire(ctx, in, set, progress)
}
