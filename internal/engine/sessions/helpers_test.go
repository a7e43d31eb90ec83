package sessions

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/pool"
)

// tester owns the tests' sessions.
const tester = runtest.Tester

// forEachKernel runs f with session kernels started cold, each in a jail
// of its own, and forked from a fork server.
func forEachKernel(t *testing.T, f func(t *testing.T, forked bool)) {
	t.Run("cold", func(t *testing.T) { f(t, false) })
	t.Run("forked", func(t *testing.T) { f(t, true) })
}

// newService starts sessions that run in real jails: forked from a fork
// server that preloads preload, or cold.
func newService(t *testing.T, sc Config, forked bool, preload ...string) *Service {
	t.Helper()
	return newServiceWith(t, sc, forked, nil, preload...)
}

// newServiceWith is newService keeping its snapshots in v.
func newServiceWith(t *testing.T, sc Config, forked bool, v Vault, preload ...string) *Service {
	t.Helper()
	return newServiceDeps(t, sc, forked, Deps{Vault: v}, preload...)
}

// newServiceDeps is newService with deps (their interpreters and forker
// set here, and their jails unless deps has some).
func newServiceDeps(t *testing.T, sc Config, forked bool, deps Deps, preload ...string) *Service {
	t.Helper()
	m := runtest.Jails(t)
	deps.Interpreters = runtest.Interpreters{}
	if deps.Jails == nil {
		deps.Jails = m
	}
	if forked {
		p := pool.New(m, pool.Config{ForkServer: true, BaseEnv: run.BaseEnv(), Preload: preload})
		t.Cleanup(func() { // after the service's: its sessions are gone by then
			if err := p.Close(); err != nil {
				t.Errorf("closing the pool: %v", err)
			}
		})
		deps.Forker = p
	}
	svc, err := New(sc, run.Limits{}, deps)
	if err != nil {
		t.Fatal(err)
	}
	svc.Run()
	t.Cleanup(func() {
		svc.Close()
		done := make(chan struct{})
		go func() {
			svc.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Close: the sessions did not end within 10s")
			svc.Abort()
			<-done
		}
		svc.Abort()
		if n := svc.Stats().Live; n != 0 {
			t.Errorf("%d sessions outlived Close", n)
		}
	})
	return svc
}

// newSession creates a session of req (of tester and 64 MiB unless it
// says) and returns its id.
func newSession(t *testing.T, svc *Service, req Request) string {
	t.Helper()
	if req.MemoryBytes == 0 {
		req.MemoryBytes = 64 << 20
	}
	if req.Caller == "" {
		req.Caller = tester
	}
	s, err := svc.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Every session of a forking service forks: none falls back unseen.
	if want, got := svc.deps.Forker != nil, kernelOf(t, svc, s.ID).forked; got != want {
		t.Fatalf("session %s forked %v, want %v", s.ID, got, want)
	}
	return s.ID
}

// live returns the live session id.
func live(t *testing.T, svc *Service, id string) *Live {
	t.Helper()
	s, err := svc.Lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// kernelOf returns the live kernel of session id.
func kernelOf(t *testing.T, svc *Service, id string) *kernel {
	t.Helper()
	s, err := svc.Lookup(id)
	if err != nil || s.kernel() == nil {
		t.Fatalf("session %s has no kernel (%v)", id, err)
	}
	return s.kernel()
}

// executeCell runs req in session id, as the engine does for its owner.
func executeCell(ctx context.Context, svc *Service, id string, req CellRequest) (CellResult, error) {
	s, err := svc.Lookup(id)
	if err != nil {
		return CellResult{}, err
	}
	return svc.ExecuteCell(ctx, s, req)
}

func cell(t *testing.T, svc *Service, id, code string) CellResult {
	t.Helper()
	r, err := svc.ExecuteCell(context.Background(), live(t, svc, id), CellRequest{Code: code, EvalLastExpr: true, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("ExecuteCell(%q): %v", code, err)
	}
	return r
}

func result(r CellResult) string {
	if r.Result == nil {
		return ""
	}
	return *r.Result
}
