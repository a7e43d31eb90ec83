package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// forkBomb forks until the jail's pids limit refuses, prints how many
// children it got and why it got no more, and then waits, with every
// child, for the wall clock to end the run.
const forkBomb = `import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
        n += 1
except OSError as e:
    print("limit", n, e.errno, flush=True)
time.sleep(3600)`

// bombLimits are an execution's default pids limit, the one every
// execution of the server gets, and a wall time the bomb reaches it in:
// alone, or six at once (twice as long) on two cores. Under emulation
// (make test-vm) a fork costs tens of times what it costs natively, so
// the VM sets a smaller limit and a longer wall time:
// PYEXEC_TEST_FORK_BOMB_PIDS and PYEXEC_TEST_FORK_BOMB_WALL (a duration).
func bombLimits(t *testing.T, atOnce bool) Limits {
	l := Limits{Pids: DefaultLimits().Pids, WallTime: 3 * time.Second}
	if v := os.Getenv("PYEXEC_TEST_FORK_BOMB_PIDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 16 {
			t.Fatalf("PYEXEC_TEST_FORK_BOMB_PIDS=%q: want a count of at least 16", v)
		}
		l.Pids = int64(n)
	}
	if v := os.Getenv("PYEXEC_TEST_FORK_BOMB_WALL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("PYEXEC_TEST_FORK_BOMB_WALL=%q: want a duration", v)
		}
		l.WallTime = d
	}
	if atOnce {
		l.WallTime *= 2
	}
	return l
}

// forkBombs is how many bombs TestForkBombsEndAtTheirLimits runs one after
// another in each kind of jail (and six at once in each, always):
// PYEXEC_TEST_FORK_BOMBS, or 3.
func forkBombs(t *testing.T) int {
	v := os.Getenv("PYEXEC_TEST_FORK_BOMBS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("PYEXEC_TEST_FORK_BOMBS=%q: want a count", v)
	}
	return n
}

// TestForkBombsEndAtTheirLimits: fork bombs at their pids limit, one after
// another and six at once, in cold, warm and forked jails, each fork up to
// the limit and end when their wall time limit is reached — a timeout,
// which names the limit — never as a jail that ended under them: the
// jail's PID 1 (the Go init of a cold or warm jail, a forked execution's
// reaper) starts no task once its payload runs, so a payload that took
// every pid left cannot stop it. The full run of the issue is
// PYEXEC_TEST_FORK_BOMBS=50.
func TestForkBombsEndAtTheirLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("fork bombs take a few seconds each")
	}
	m := needJail(t)
	tpl := startTemplate(t, m)
	n := forkBombs(t)
	for _, mode := range []struct {
		name  string
		start bombStart
	}{{"cold", coldBomb(m)}, {"warm", warmBomb(m)}, {"forked", forkedBomb(tpl)}} {
		t.Run(mode.name, func(t *testing.T) {
			t0 := time.Now()
			for i := range n {
				if !runBomb(t, fmt.Sprintf("bomb %d of %d", i+1, n), bombLimits(t, false), mode.start) {
					return
				}
			}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runBomb(t, fmt.Sprintf("bomb %d of 6 at once", i+1), bombLimits(t, true), mode.start)
				}()
			}
			wg.Wait()
			t.Logf("%d bombs one after another and 6 at once in %s", n, time.Since(t0).Round(time.Millisecond))
		})
	}
}

// bombStart starts the fork bomb in a jail of its kind with limits l, its
// output going to out, and returns the jail and its running payload.
type bombStart func(t *testing.T, ctx context.Context, l Limits, out OutputFunc) (*Jail, *Process)

// coldBomb starts the bomb as Manager.Run does: in a jail prepared for it.
func coldBomb(m *Manager) bombStart {
	return func(t *testing.T, ctx context.Context, l Limits, out OutputFunc) (*Jail, *Process) {
		j, err := m.Prepare(ctx, Base{})
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		p, err := j.Start(ctx, Spec{Argv: []string{python, "-c", forkBomb}, Env: testEnv, Limits: l}, out)
		if err != nil {
			j.Close()
			t.Fatalf("Start: %v", err)
		}
		p.CloseStdin()
		return j, p
	}
}

// warmBomb hands the bomb to an interpreter started first with the
// ceilings, as the warm pool does.
func warmBomb(m *Manager) bombStart {
	return func(t *testing.T, ctx context.Context, l Limits, out OutputFunc) (*Jail, *Process) {
		j, err := m.Prepare(ctx, Base{})
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		p, err := j.Start(ctx, Spec{Argv: []string{python, "-c", silentWaiter}, Env: testEnv, Requests: true,
			Limits: ceilingsFor(Spec{Limits: l})}, out)
		if err != nil {
			j.Close()
			t.Fatalf("Start: %v", err)
		}
		return j, p
	}
}

// forkedBomb hands the bomb to an execution forked from tpl.
func forkedBomb(tpl *Template) bombStart {
	return func(t *testing.T, ctx context.Context, l Limits, out OutputFunc) (*Jail, *Process) {
		j, p, err := tpl.Fork(ctx, Spec{Argv: []string{python}, Env: testEnv, Requests: true,
			Limits: ceilingsFor(Spec{Limits: l})}, out)
		if err != nil {
			t.Fatalf("Fork: %v", err)
		}
		return j, p
	}
}

// runBomb runs one fork bomb and checks its outcome and that the jail's
// PID 1 started no task while the payload ran (its task count when the
// payload started and when the bomb found the limit). It reports whether
// the checks passed.
func runBomb(t *testing.T, name string, l Limits, start bombStart) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.WallTime+time.Minute)
	defer cancel()
	var mu sync.Mutex
	var stdout bytes.Buffer
	limited := make(chan struct{})
	var once sync.Once
	out := func(s Stream, b []byte) {
		if s != Stdout {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		stdout.Write(b)
		if bytes.Contains(stdout.Bytes(), []byte("\n")) {
			once.Do(func() { close(limited) })
		}
	}
	j, p := start(t, ctx, l, out)
	defer j.Close()
	pid1 := j.initPid()
	before := tasks(pid1)
	if p.exec.Requests {
		if err := p.HandOff(l, nil, []byte(forkBomb)); err != nil {
			t.Fatalf("%s: HandOff: %v", name, err)
		}
		p.CloseStdin()
	}
	during := -1
	t0 := time.Now()
	select {
	case <-limited:
		during = tasks(pid1)
		t.Logf("%s: at the pids limit after %s of its %s", name, time.Since(t0).Round(time.Millisecond), l.WallTime)
	case <-p.Done():
	}
	r := p.Wait()
	mu.Lock()
	said := stdout.String()
	mu.Unlock()
	ok := true
	if r.Status != StatusTimeout || !strings.Contains(r.Reason, "wall time limit") {
		t.Errorf("%s: status %s (%s), stdout %q, stderr %q; want a timeout naming the wall time limit",
			name, r.Status, r.Reason, said, r.Stderr)
		ok = false
	}
	var children, errno int
	if _, err := fmt.Sscanf(said, "limit %d %d", &children, &errno); err != nil || errno != 11 || children < int(l.Pids)/2 {
		t.Errorf("%s: the bomb printed %q; want it stopped by the pids limit (EAGAIN) after at least %d children",
			name, said, l.Pids/2)
		ok = false
	}
	if during != before {
		t.Errorf("%s: the jail's PID 1 had %d tasks when its payload started and %d when the payload found the pids limit",
			name, before, during)
		ok = false
	}
	return ok
}

// tasks counts the threads of process pid (-1 if it is gone).
func tasks(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}
