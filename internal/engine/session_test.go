package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pool"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/store"
)

// forEachKernel runs f with session kernels started cold, each in a jail
// of its own, and forked from a fork server.
func forEachKernel(t *testing.T, f func(t *testing.T, forked bool)) {
	t.Run("cold", func(t *testing.T) { f(t, false) })
	t.Run("forked", func(t *testing.T) { f(t, true) })
}

// sessionEngine starts an engine whose sessions run in real jails: forked
// from a fork server that preloads preload, or cold.
func sessionEngine(t *testing.T, sc SessionConfig, forked bool, preload ...string) *Engine {
	t.Helper()
	m := jailRunner(t)
	ctx := context.Background()
	deps := Deps{Runner: m, Jails: m, Interpreters: fakeInterpreters{}, Driver: RunnerDriver{}}
	if forked {
		p := pool.New(m, pool.Config{ForkServer: true, BaseEnv: BaseEnv(), Preload: preload})
		t.Cleanup(func() { // after the engine's: its sessions are gone by then
			if err := p.Close(); err != nil {
				t.Errorf("closing the pool: %v", err)
			}
		})
		deps.Forker = p
	}
	emb, err := store.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	deps.Store = st
	eng, err := New(Config{Sessions: sc}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := eng.SessionStats().Live; n != 0 {
			t.Errorf("%d sessions outlived Close", n)
		}
		_ = emb.Close()
	})
	return eng
}

func newSession(t *testing.T, eng *Engine, req SessionRequest) string {
	t.Helper()
	if req.MemoryBytes == 0 {
		req.MemoryBytes = 64 << 20
	}
	if req.Caller == "" {
		req.Caller = tester.Name
	}
	s, err := eng.CreateSession(context.Background(), req)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	// Every session of a forking engine forks: none falls back unseen.
	if want, got := eng.deps.Forker != nil, kernelOf(t, eng, s.ID).forked; got != want {
		t.Fatalf("session %s forked %v, want %v", s.ID, got, want)
	}
	return s.ID
}

// kernelOf returns the live kernel of session id.
func kernelOf(t *testing.T, eng *Engine, id string) *kernel {
	t.Helper()
	eng.sess.mu.Lock()
	s := eng.sess.live[id]
	eng.sess.mu.Unlock()
	if s == nil || s.kernel() == nil {
		t.Fatalf("session %s has no kernel", id)
	}
	return s.kernel()
}

func cell(t *testing.T, eng *Engine, id, code string) CellResult {
	t.Helper()
	r, err := eng.ExecuteCell(context.Background(), id, tester, CellRequest{Code: code, EvalLastExpr: true, Timeout: 20 * time.Second})
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

func TestSessionCells(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{}, forked)
		id := newSession(t, eng, SessionRequest{})
		steps := []struct {
			name, code   string
			stdout       string
			result       string
			errType      string
			errLine      int
			count        int
			stderrHas    string
			wantOutputs  int
			wantExitCode int
		}{
			{name: "define", code: "x = 1\nprint('hello')", stdout: "hello\n", count: 1},
			{name: "increment", code: "x += 1\nx", result: "2", count: 2, wantOutputs: 1},
			{name: "third call sees both", code: "import os\nx += 1\nprint(os.getcwd())\nx", stdout: "/work\n", result: "3", count: 3, wantOutputs: 1},
			{name: "traceback at the cell's line", code: "y = 1\nz = 2\nundefined_name\n", errType: "NameError", errLine: 3, count: 4,
				stderrHas: `File "<cell-4>", line 3`, wantExitCode: 1},
			{name: "files persist", code: "open('data.txt', 'w').write('kept')\nopen('data.txt').read()", result: "'kept'", count: 5, wantOutputs: 1},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				r := cell(t, eng, id, st.code)
				if r.Status != StatusCompleted || r.Stdout != st.stdout || result(r) != st.result || r.ErrorType != st.errType ||
					r.ErrorLine != st.errLine || r.ExecutionCount != st.count || !strings.Contains(r.Stderr, st.stderrHas) ||
					len(r.Outputs) != st.wantOutputs || r.ExitCode != st.wantExitCode {
					t.Errorf("got status=%s stdout=%q stderr=%q result=%q error=%s@%d count=%d outputs=%d exit=%d",
						r.Status, r.Stdout, r.Stderr, result(r), r.ErrorType, r.ErrorLine, r.ExecutionCount, len(r.Outputs), r.ExitCode)
				}
			})
		}
		t.Run("uploaded file is visible and listed", func(t *testing.T) {
			ctx := context.Background()
			if err := eng.PutSessionFile(ctx, id, tester, "in/upload.bin", []byte{0, 1, 2, 255}); err != nil {
				t.Fatal(err)
			}
			r := cell(t, eng, id, "list(open('in/upload.bin', 'rb').read())")
			if result(r) != "[0, 1, 2, 255]" {
				t.Errorf("cell read %q", result(r))
			}
			files, err := eng.ListSessionFiles(ctx, id, tester)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range files {
				names = append(names, f.Path)
			}
			if got := strings.Join(names, ","); got != "data.txt,in/upload.bin" {
				t.Errorf("files = %s", got)
			}
			data, err := eng.ReadSessionFile(ctx, id, tester, "data.txt")
			if err != nil || string(data) != "kept" {
				t.Errorf("ReadSessionFile = %q, %v", data, err)
			}
			cell(t, eng, id, "import os\nos.symlink('/etc/passwd', 'link')")
			if _, err := eng.ReadSessionFile(ctx, id, tester, "link"); !errors.Is(err, ErrFileNotFound) {
				t.Errorf("reading a symlink: %v, want ErrFileNotFound", err)
			}
			if _, err := eng.ReadSessionFile(ctx, id, tester, "../etc/passwd"); !errors.Is(err, ErrInvalid) {
				t.Errorf("reading ../etc/passwd: %v, want ErrInvalid", err)
			}
		})
	})
}

func TestSessionInterrupt(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{}, forked)
		id := newSession(t, eng, SessionRequest{})
		ctx := context.Background()
		cell(t, eng, id, "x = 41")
		done := make(chan CellResult, 1)
		go func() {
			r, err := eng.ExecuteCell(ctx, id, tester, CellRequest{Code: "while True: pass"})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		waitBusy(t, eng, id)
		if _, err := eng.ExecuteCell(ctx, id, tester, CellRequest{Code: "1"}); !errors.Is(err, ErrSessionBusy) {
			t.Errorf("a second cell while busy: %v, want ErrSessionBusy", err)
		}
		if err := eng.InterruptSession(ctx, id, tester); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.ErrorType != "KeyboardInterrupt" || r.ErrorLine != 1 || r.Status != StatusCompleted || r.SessionEnded {
			t.Errorf("interrupted cell: status=%s error=%s@%d ended=%v", r.Status, r.ErrorType, r.ErrorLine, r.SessionEnded)
		}
		if got := result(cell(t, eng, id, "x + 1")); got != "42" {
			t.Errorf("x after the interrupt: %q, want 42", got)
		}
	})
}

func waitBusy(t *testing.T, eng *Engine, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := eng.GetSession(context.Background(), id, tester); err == nil && s.State == SessionBusy {
			time.Sleep(200 * time.Millisecond) // let the cell reach its loop
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the session never became busy")
}

func TestSessionTimeouts(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		ctx := context.Background()
		t.Run("a cell that yields keeps the session", func(t *testing.T) {
			// A grace generous enough for a slow (emulated) machine: a cell
			// that yields ends as soon as it handles the interrupt.
			eng := sessionEngine(t, SessionConfig{InterruptGrace: 20 * time.Second}, forked)
			id := newSession(t, eng, SessionRequest{})
			cell(t, eng, id, "x = 7")
			r, err := eng.ExecuteCell(ctx, id, tester, CellRequest{Code: "import time\nwhile True: time.sleep(0.01)", Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != StatusFailed || r.Reason != ReasonTimeout || !r.TimedOut || r.SessionEnded || r.ErrorType != "KeyboardInterrupt" {
				t.Errorf("got status=%s reason=%s ended=%v error=%s", r.Status, r.Reason, r.SessionEnded, r.ErrorType)
			}
			if got := result(cell(t, eng, id, "x")); got != "7" {
				t.Errorf("x = %q after the timeout", got)
			}
		})
		t.Run("a cell that does not yield ends the session", func(t *testing.T) {
			eng := sessionEngine(t, SessionConfig{InterruptGrace: 300 * time.Millisecond}, forked)
			id := newSession(t, eng, SessionRequest{})
			code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)"
			r, err := eng.ExecuteCell(ctx, id, tester, CellRequest{Code: code, Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != StatusFailed || r.Reason != ReasonTimeout || !r.SessionEnded {
				t.Errorf("got status=%s reason=%s ended=%v", r.Status, r.Reason, r.SessionEnded)
			}
			if _, err := eng.GetSession(ctx, id, tester); !errors.Is(err, ErrSessionNotFound) {
				t.Errorf("GetSession after the kill: %v, want ErrSessionNotFound", err)
			}
		})
	})
}

func TestSessionRestart(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{}, forked)
		ctx := context.Background()
		id := newSession(t, eng, SessionRequest{})
		cell(t, eng, id, "x = 1\nimport os\nos.makedirs('d', exist_ok=True)\nopen('d/f.txt', 'w').write('still here')")
		s, err := eng.RestartSession(ctx, id, tester)
		if err != nil {
			t.Fatal(err)
		}
		if s.ExecutionCount != 0 || s.Restarts != 1 {
			t.Errorf("after restart: count=%d restarts=%d", s.ExecutionCount, s.Restarts)
		}
		r := cell(t, eng, id, "'x' in globals(), open('d/f.txt').read()")
		if got := result(r); got != "(False, 'still here')" || r.ExecutionCount != 1 {
			t.Errorf("after restart: %q (count %d)", got, r.ExecutionCount)
		}
	})
}

func TestSessionReaping(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{ReapInterval: 50 * time.Millisecond}, forked)
		ctx := context.Background()
		idle := newSession(t, eng, SessionRequest{IdleTimeout: 700 * time.Millisecond})
		busy := newSession(t, eng, SessionRequest{IdleTimeout: 700 * time.Millisecond})
		short := newSession(t, eng, SessionRequest{MaxLifetime: 2 * time.Second})
		start := time.Now()
		r := cell(t, eng, busy, "import time\ntime.sleep(1.2)\n'slept'")
		if result(r) != "'slept'" {
			t.Errorf("a busy session's cell: %q (%s %s)", result(r), r.Reason, r.Error)
		}
		if _, err := eng.GetSession(ctx, idle, tester); !errors.Is(err, ErrSessionNotFound) {
			t.Errorf("idle session after %s: %v, want reaped", time.Since(start), err)
		}
		if _, err := eng.GetSession(ctx, busy, tester); err != nil {
			t.Errorf("a session busy past its idle timeout was reaped: %v", err)
		}
		time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
		if _, err := eng.GetSession(ctx, short, tester); !errors.Is(err, ErrSessionNotFound) {
			t.Errorf("session past its max lifetime: %v, want reaped", err)
		}
	})
}

func TestSessionCaps(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{Max: 3, MaxPerCaller: 2}, forked)
		ctx := context.Background()
		newSession(t, eng, SessionRequest{Caller: "a"})
		newSession(t, eng, SessionRequest{Caller: "a"})
		if _, err := eng.CreateSession(ctx, SessionRequest{Caller: "a", MemoryBytes: 64 << 20}); !errors.Is(err, ErrTooManySessions) {
			t.Errorf("third session of a caller: %v, want ErrTooManySessions", err)
		}
		b := newSession(t, eng, SessionRequest{Caller: "b"})
		if _, err := eng.CreateSession(ctx, SessionRequest{Caller: "c", MemoryBytes: 64 << 20}); !errors.Is(err, ErrTooManySessions) {
			t.Errorf("fourth session on the server: %v, want ErrTooManySessions", err)
		}
		if _, err := eng.GetSession(ctx, b, Caller{Name: "a"}); !errors.Is(err, ErrSessionNotFound) {
			t.Errorf("another caller's session: %v, want ErrSessionNotFound", err)
		}
		if got := len(eng.ListSessions(ctx, Caller{Name: "a"})); got != 2 {
			t.Errorf("caller a lists %d sessions, want 2", got)
		}
		if err := eng.DeleteSession(ctx, b, Caller{Name: "b"}); err != nil {
			t.Fatal(err)
		}
		newSession(t, eng, SessionRequest{Caller: "c"})
	})
}

func TestSessionsConcurrent(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		const n = 20
		eng := sessionEngine(t, SessionConfig{Max: n, MaxPerCaller: n}, forked)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := eng.CreateSession(ctx, SessionRequest{MemoryBytes: 64 << 20, Caller: tester.Name})
				if err != nil {
					errs <- err
					return
				}
				for range 3 {
					if _, err := eng.ExecuteCell(ctx, s.ID, tester, CellRequest{Code: fmt.Sprintf("n = globals().get('n', 0) + %d", i)}); err != nil {
						errs <- err
						return
					}
				}
				r, err := eng.ExecuteCell(ctx, s.ID, tester, CellRequest{Code: "n", EvalLastExpr: true, Timeout: 30 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprint(3 * i); result(r) != want {
					errs <- fmt.Errorf("session %d: n = %q, want %s", i, result(r), want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		list := eng.ListSessions(ctx, tester)
		if len(list) != n {
			t.Fatalf("%d sessions listed, want %d", len(list), n)
		}
		for _, s := range list {
			if s.MemoryBytes <= 0 || s.MemoryBytes > s.MemoryLimit || s.MemoryLimit != 64<<20 {
				t.Errorf("session %s: memory %d of %d", s.ID, s.MemoryBytes, s.MemoryLimit)
			}
		}
		if st := eng.SessionStats(); st.Live != n {
			t.Errorf("stats: %+v", st)
		}
	})
}

// TestSessionSeesOnlyItsOwnJail: a session's cells find only stdio open
// (the kernel fetches its cell pipe and its channel from the jail's PID 1
// for each use), and the kernel's own cgroup as the root of its cgroup
// namespace, in the first cell and in a later one; a cell that closes
// every descriptor leaves the kernel working.
func TestSessionSeesOnlyItsOwnJail(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		eng := sessionEngine(t, SessionConfig{}, forked)
		id := newSession(t, eng, SessionRequest{})
		for _, n := range []string{"first", "second"} {
			r := cell(t, eng, id, runnertest.OwnViewProbe)
			if r.Status != StatusCompleted || r.ExitCode != 0 {
				t.Fatalf("%s cell: status %s exit %d stderr %s", n, r.Status, r.ExitCode, r.Stderr)
			}
			runnertest.CheckOwnView(t, r.Stdout)
		}
		// Closing every descriptor takes neither the channel nor the cells
		// away from the kernel: it fetches them again for each use.
		if r := cell(t, eng, id, "import os; os.closerange(3, 1 << 16); 6 * 7"); r.Status != StatusCompleted || result(r) != "42" {
			t.Fatalf("closing descriptors: status %s result %q stderr %s", r.Status, result(r), r.Stderr)
		}
		if r := cell(t, eng, id, "7 * 6"); r.Status != StatusCompleted || result(r) != "42" {
			t.Fatalf("the cell after: status %s result %q stderr %s", r.Status, result(r), r.Stderr)
		}
	})
}
