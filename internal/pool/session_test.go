package pool

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// kernelSpec is what the engine builds for a session's kernel.
func kernelSpec(extraEnv ...string) sandbox.Spec {
	return sandbox.Spec{
		Argv:          runner.SessionArgv(python, runner.SessionOptions{}),
		Env:           append(append([]string(nil), baseEnv...), extraEnv...),
		Dir:           sandbox.WorkDir,
		ResultChannel: true,
		StreamChannel: true,
		Requests:      true,
		LiveOnly:      true,
	}
}

// TestSessionKeepsItsForkServer: a session kernel forks from the fork
// server executions of its interpreter use, and keeps it running after
// their kind went idle; the server goes once unused for Idle.
func TestSessionKeepsItsForkServer(t *testing.T) {
	p := newPool(t, Config{Idle: 400 * time.Millisecond, ForkServer: true})
	s := spec("pass\n")
	stop := keepInUse(t, p, s)
	warmUp(t, p, s)
	stop()
	j, proc, release, err := p.ForkSession(context.Background(), kernelSpec(), nil, true)
	if err != nil || j == nil {
		t.Fatalf("ForkSession: %v (forked: %v)", err, j != nil)
	}
	if st := p.Stats(); st.Templates != 1 || st.Sessions != 1 {
		t.Fatalf("one kind and one session share one fork server: %+v", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Kinds > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle kind still warm: %+v", p.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-proc.Done():
		t.Fatalf("the session's kernel ended with its kind: %+v", proc.Wait())
	default:
	}
	if st := p.Stats(); st.Templates != 1 || st.Sessions != 1 {
		t.Fatalf("the session's fork server went with the idle kind: %+v", st)
	}
	proc.Kill()
	proc.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	release()
	release() // a second call changes nothing
	// The server waits Idle for the next session, then goes.
	if st := p.Stats(); st.Templates != 1 || st.Sessions != 0 {
		t.Fatalf("right after the last session: %+v", st)
	}
	deadline = time.Now().Add(10 * time.Second)
	for p.Stats().Templates != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an unused fork server is still running: %+v", p.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSessionsThatDoNotFork: what a running interpreter cannot take, and
// a pool without fork servers, leave the kernel to start cold.
func TestSessionsThatDoNotFork(t *testing.T) {
	forking := newPool(t, Config{ForkServer: true})
	network := kernelSpec()
	network.Network = true
	removed := kernelSpec()
	removed.Env = baseEnv[1:]
	plain := sandbox.Spec{Argv: runner.WarmArgv(python), Env: baseEnv, Requests: true}
	for _, c := range []struct {
		name string
		p    *Pool
		spec sandbox.Spec
	}{
		{"fork servers off", newPool(t, Config{}), kernelSpec()},
		{"a PYTHON variable", forking, kernelSpec("PYTHONHASHSEED=1")},
		{"a base variable dropped", forking, removed},
		{"network", forking, network},
		{"not a session kernel", forking, plain},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, _, _, err := c.p.ForkSession(context.Background(), c.spec, nil, true)
			if j != nil || err != nil {
				t.Fatalf("forked (%v, %v), want a cold start", j != nil, err)
			}
		})
	}
	t.Run("no fork server running, and none to start", func(t *testing.T) {
		if j, _, _, err := forking.ForkSession(context.Background(), kernelSpec(), nil, false); j != nil || err != nil {
			t.Fatalf("forked (%v, %v), want a cold start", j != nil, err)
		}
	})
	if st := forking.Stats(); st.Templates != 0 || st.Sessions != 0 {
		t.Fatalf("a fork server started for nothing: %+v", st)
	}
}

// TestSessionTakesAKernelForkedAhead: after a session forked, the pool
// forks the next session's kernel ahead; the next session takes it, with
// its own environment and a working cell pipe.
func TestSessionTakesAKernelForkedAhead(t *testing.T) {
	p := newPool(t, Config{ForkServer: true})
	first, proc, release, err := p.ForkSession(context.Background(), kernelSpec(), nil, true)
	if err != nil || first == nil {
		t.Fatalf("ForkSession: %v", err)
	}
	t.Cleanup(func() { proc.Kill(); proc.Wait(); first.Close(); release() })
	deadline := time.Now().Add(30 * time.Second)
	for p.Stats().Warm != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no kernel forked ahead: %+v", p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var mu sync.Mutex
	var stdout strings.Builder
	out := func(s sandbox.Stream, b []byte) {
		if s == sandbox.Stdout {
			mu.Lock()
			stdout.Write(b)
			mu.Unlock()
		}
	}
	var ahead *sandbox.Jail
	p.mu.Lock()
	for _, f := range p.forks {
		if ks := f.readyKernels(); len(ks) == 1 {
			ahead = ks[0].jail
		}
	}
	p.mu.Unlock()
	spec := kernelSpec("GREETING=hi")
	spec.Limits.MemoryBytes = 64 << 20
	j, kp, release2, err := p.ForkSession(context.Background(), spec, out, true)
	if err != nil || j == nil || j != ahead {
		t.Fatalf("second ForkSession: %v (the kernel forked ahead: %v)", err, j == ahead)
	}
	defer func() { kp.Kill(); kp.Wait(); j.Close(); release2() }()
	if st := p.Stats(); st.Sessions != 2 {
		t.Fatalf("two sessions: %+v", st)
	}
	if err := kp.Send(runner.Cell{Number: 1, Code: "import os\nprint(os.environ['GREETING'], 6 * 7)"}.Frame()); err != nil {
		t.Fatal(err)
	}
	for {
		mu.Lock()
		got := stdout.String()
		mu.Unlock()
		if strings.Contains(got, "hi 42") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cell printed %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if kp.MemoryUsage() <= 0 {
		t.Fatal("no memory accounted to the session's cgroup")
	}
}
