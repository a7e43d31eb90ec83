package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner/runnertest"
)

func TestSessionCells(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{})
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
				r := cell(t, svc, id, st.code)
				if r.Status != run.StatusCompleted || r.Stdout != st.stdout || result(r) != st.result || r.ErrorType != st.errType ||
					r.ErrorLine != st.errLine || r.ExecutionCount != st.count || !strings.Contains(r.Stderr, st.stderrHas) ||
					len(r.Outputs) != st.wantOutputs || r.ExitCode != st.wantExitCode {
					t.Errorf("got status=%s stdout=%q stderr=%q result=%q error=%s@%d count=%d outputs=%d exit=%d",
						r.Status, r.Stdout, r.Stderr, result(r), r.ErrorType, r.ErrorLine, r.ExecutionCount, len(r.Outputs), r.ExitCode)
				}
			})
		}
		t.Run("uploaded file is visible and listed", func(t *testing.T) {
			if err := svc.PutFile(context.Background(), live(t, svc, id), "in/upload.bin", []byte{0, 1, 2, 255}); err != nil {
				t.Fatal(err)
			}
			r := cell(t, svc, id, "list(open('in/upload.bin', 'rb').read())")
			if result(r) != "[0, 1, 2, 255]" {
				t.Errorf("cell read %q", result(r))
			}
			files, err := svc.ListFiles(context.Background(), live(t, svc, id))
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
			data, err := svc.ReadFile(context.Background(), live(t, svc, id), "data.txt")
			if err != nil || string(data) != "kept" {
				t.Errorf("ReadSessionFile = %q, %v", data, err)
			}
			cell(t, svc, id, "import os\nos.symlink('/etc/passwd', 'link')")
			if _, err := svc.ReadFile(context.Background(), live(t, svc, id), "link"); !errors.Is(err, run.ErrFileNotFound) {
				t.Errorf("reading a symlink: %v, want run.ErrFileNotFound", err)
			}
			if _, err := svc.ReadFile(context.Background(), live(t, svc, id), "../etc/passwd"); !errors.Is(err, run.ErrInvalid) {
				t.Errorf("reading ../etc/passwd: %v, want run.ErrInvalid", err)
			}
		})
	})
}

func TestSessionInterrupt(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{})
		ctx := context.Background()
		cell(t, svc, id, "x = 41")
		done := make(chan CellResult, 1)
		go func() {
			r, err := executeCell(ctx, svc, id, CellRequest{Code: "while True: pass"})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		waitBusy(t, svc, id)
		if _, err := svc.ExecuteCell(ctx, live(t, svc, id), CellRequest{Code: "1"}); !errors.Is(err, ErrBusy) {
			t.Errorf("a second cell while busy: %v, want ErrBusy", err)
		}
		if err := svc.Interrupt(live(t, svc, id)); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.ErrorType != "KeyboardInterrupt" || r.ErrorLine != 1 || r.Status != run.StatusCompleted || r.SessionEnded {
			t.Errorf("interrupted cell: status=%s error=%s@%d ended=%v", r.Status, r.ErrorType, r.ErrorLine, r.SessionEnded)
		}
		if got := result(cell(t, svc, id, "x + 1")); got != "42" {
			t.Errorf("x after the interrupt: %q, want 42", got)
		}
	})
}

func waitBusy(t *testing.T, svc *Service, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := svc.Lookup(id); err == nil && s.Info().State == Busy {
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
			svc := newService(t, Config{InterruptGrace: 20 * time.Second}, forked)
			id := newSession(t, svc, Request{})
			cell(t, svc, id, "x = 7")
			r, err := svc.ExecuteCell(ctx, live(t, svc, id), CellRequest{Code: "import time\nwhile True: time.sleep(0.01)", Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != run.StatusFailed || r.Reason != run.ReasonTimeout || !r.TimedOut || r.SessionEnded || r.ErrorType != "KeyboardInterrupt" {
				t.Errorf("got status=%s reason=%s ended=%v error=%s", r.Status, r.Reason, r.SessionEnded, r.ErrorType)
			}
			if got := result(cell(t, svc, id, "x")); got != "7" {
				t.Errorf("x = %q after the timeout", got)
			}
		})
		t.Run("a cell that does not yield ends the session", func(t *testing.T) {
			svc := newService(t, Config{InterruptGrace: 300 * time.Millisecond}, forked)
			id := newSession(t, svc, Request{})
			code := "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)"
			r, err := svc.ExecuteCell(ctx, live(t, svc, id), CellRequest{Code: code, Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != run.StatusFailed || r.Reason != run.ReasonTimeout || !r.SessionEnded {
				t.Errorf("got status=%s reason=%s ended=%v", r.Status, r.Reason, r.SessionEnded)
			}
			if _, err := svc.Lookup(id); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetSession after the kill: %v, want ErrNotFound", err)
			}
		})
	})
}

func TestSessionRestart(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{})
		cell(t, svc, id, "x = 1\nimport os\nos.makedirs('d', exist_ok=True)\nopen('d/f.txt', 'w').write('still here')")
		s, err := svc.Restart(context.Background(), live(t, svc, id))
		if err != nil {
			t.Fatal(err)
		}
		if s.ExecutionCount != 0 || s.Restarts != 1 {
			t.Errorf("after restart: count=%d restarts=%d", s.ExecutionCount, s.Restarts)
		}
		r := cell(t, svc, id, "'x' in globals(), open('d/f.txt').read()")
		if got := result(r); got != "(False, 'still here')" || r.ExecutionCount != 1 {
			t.Errorf("after restart: %q (count %d)", got, r.ExecutionCount)
		}
	})
}

// TestRestartOfAWorkspaceOverItsDisk: a restart or a fork that cannot
// carry the workspace (a sparse file bigger than the disk limit) is
// refused with ErrWorkspaceTooLarge; the session keeps its interpreter,
// its variables and its files, and no child session is left.
func TestRestartOfAWorkspaceOverItsDisk(t *testing.T) {
	svc := newService(t, Config{}, false)
	id := newSession(t, svc, Request{DiskBytes: 16 << 20})
	cell(t, svc, id, "x = 41\nwith open('big', 'wb') as f: f.truncate(64 << 20)")
	_, err := svc.Restart(context.Background(), live(t, svc, id))
	if !errors.Is(err, ErrWorkspaceTooLarge) {
		t.Fatalf("restart of a workspace over its disk limit: %v, want ErrWorkspaceTooLarge", err)
	}
	if _, err := svc.Fork(context.Background(), live(t, svc, id)); !errors.Is(err, ErrWorkspaceTooLarge) {
		t.Errorf("fork of a workspace over its disk limit: %v, want ErrWorkspaceTooLarge", err)
	}
	if r := cell(t, svc, id, "import os\nx + 1, os.path.getsize('big')"); result(r) != "(42, 67108864)" {
		t.Errorf("the session after the refusals: %q (%s %s), want its variable and file", result(r), r.Reason, r.Error)
	}
	if n := len(svc.List(func(string) bool { return true })); n != 1 {
		t.Errorf("%d sessions after the refused fork, want the parent only", n)
	}
}

func TestSessionReaping(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{ReapInterval: 50 * time.Millisecond}, forked)
		// Under emulation (the VM) a session can take longer to start than
		// these timeouts: short is not made first (the first of a service
		// also starts its fork server, and short would end before its
		// create returned), and busy is made last, right before its cell
		// (made before another, it would be reaped as idle first).
		idle := newSession(t, svc, Request{IdleTimeout: 700 * time.Millisecond})
		short := newSession(t, svc, Request{MaxLifetime: 2 * time.Second})
		busy := newSession(t, svc, Request{IdleTimeout: 700 * time.Millisecond})
		start := time.Now()
		r := cell(t, svc, busy, "import time\ntime.sleep(1.2)\n'slept'")
		if result(r) != "'slept'" {
			t.Errorf("a busy session's cell: %q (%s %s)", result(r), r.Reason, r.Error)
		}
		if _, err := svc.Lookup(idle); !errors.Is(err, ErrNotFound) {
			t.Errorf("idle session after %s: %v, want reaped", time.Since(start), err)
		}
		if _, err := svc.Lookup(busy); err != nil {
			t.Errorf("a session busy past its idle timeout was reaped: %v", err)
		}
		time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
		if _, err := svc.Lookup(short); !errors.Is(err, ErrNotFound) {
			t.Errorf("session past its max lifetime: %v, want reaped", err)
		}
	})
}

func TestSessionCaps(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{Max: 3, MaxPerCaller: 2}, forked)
		ctx := context.Background()
		newSession(t, svc, Request{Caller: "a"})
		newSession(t, svc, Request{Caller: "a"})
		if _, err := svc.Create(ctx, Request{Caller: "a", MemoryBytes: 64 << 20}); !errors.Is(err, ErrTooMany) {
			t.Errorf("third session of a caller: %v, want ErrTooMany", err)
		}
		b := newSession(t, svc, Request{Caller: "b"})
		if _, err := svc.Create(ctx, Request{Caller: "c", MemoryBytes: 64 << 20}); !errors.Is(err, ErrTooMany) {
			t.Errorf("fourth session on the server: %v, want ErrTooMany", err)
		}
		// (That b's session is hidden from a is the engine's check:
		// TestSessionTenancy.)
		if got := len(svc.List(func(owner string) bool { return owner == "a" })); got != 2 {
			t.Errorf("caller a lists %d sessions, want 2", got)
		}
		svc.Delete(live(t, svc, b))
		newSession(t, svc, Request{Caller: "c"})
	})
}

func TestSessionsConcurrent(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		const n = 20
		svc := newService(t, Config{Max: n, MaxPerCaller: n}, forked)
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := svc.Create(ctx, Request{MemoryBytes: 64 << 20, Caller: tester})
				if err != nil {
					errs <- err
					return
				}
				for range 3 {
					if _, err := executeCell(ctx, svc, s.ID, CellRequest{Code: fmt.Sprintf("n = globals().get('n', 0) + %d", i)}); err != nil {
						errs <- err
						return
					}
				}
				r, err := executeCell(ctx, svc, s.ID, CellRequest{Code: "n", EvalLastExpr: true, Timeout: 30 * time.Second})
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
		list := svc.List(func(owner string) bool { return owner == tester })
		if len(list) != n {
			t.Fatalf("%d sessions listed, want %d", len(list), n)
		}
		for _, s := range list {
			if s.MemoryBytes <= 0 || s.MemoryBytes > s.MemoryLimit || s.MemoryLimit != 64<<20 {
				t.Errorf("session %s: memory %d of %d", s.ID, s.MemoryBytes, s.MemoryLimit)
			}
		}
		if st := svc.Stats(); st.Live != n {
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
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{})
		for _, n := range []string{"first", "second"} {
			r := cell(t, svc, id, runnertest.OwnViewProbe)
			if r.Status != run.StatusCompleted || r.ExitCode != 0 {
				t.Fatalf("%s cell: status %s exit %d stderr %s", n, r.Status, r.ExitCode, r.Stderr)
			}
			runnertest.CheckOwnView(t, r.Stdout)
		}
		// Closing every descriptor takes neither the channel nor the cells
		// away from the kernel: it fetches them again for each use.
		if r := cell(t, svc, id, "import os; os.closerange(3, 1 << 16); 6 * 7"); r.Status != run.StatusCompleted || result(r) != "42" {
			t.Fatalf("closing descriptors: status %s result %q stderr %s", r.Status, result(r), r.Stderr)
		}
		if r := cell(t, svc, id, "7 * 6"); r.Status != run.StatusCompleted || result(r) != "42" {
			t.Fatalf("the cell after: status %s result %q stderr %s", r.Status, result(r), r.Stderr)
		}
	})
}

// TestAnEndedInterpreterAnswersSessionEnded: a session whose interpreter
// ended by itself (killed here, as the kernel's OOM killer would) answers
// a restart, a fork, a file write, a listing and a snapshot that it ended
// (ErrEnded, 410; or ErrBusy, 409, while its end is noticed), not with an
// error of the server (500); and when it says ended, the session is gone,
// and a fork left no child behind.
func TestAnEndedInterpreterAnswersSessionEnded(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newServiceWith(t, Config{}, forked, newVault(t))
		ctx := context.Background()
		calls := []struct {
			name string
			call func(s *Live) error
		}{
			{"restart", func(s *Live) error { _, err := svc.Restart(ctx, s); return err }},
			{"fork", func(s *Live) error { _, err := svc.Fork(ctx, s); return err }},
			{"put a file", func(s *Live) error { return svc.PutFile(ctx, s, "f.txt", []byte("x")) }},
			{"list files", func(s *Live) error { _, err := svc.ListFiles(ctx, s); return err }},
			{"snapshot", func(s *Live) error { _, err := svc.Snapshot(ctx, s); return err }},
		}
		for _, c := range calls {
			id := newSession(t, svc, Request{})
			s := live(t, svc, id)
			k := s.kernel()
			k.proc.Kill()
			<-k.proc.Done()
			err := c.call(s)
			switch {
			case errors.Is(err, ErrEnded):
				if _, err := svc.Lookup(id); !errors.Is(err, ErrNotFound) {
					t.Errorf("%s answered that the session ended, but it is still there (%v)", c.name, err)
				}
			case errors.Is(err, ErrBusy):
			default:
				t.Errorf("%s after the interpreter ended: %v, want ErrEnded (or ErrBusy: ending)", c.name, err)
			}
			svc.Delete(s)
			if n := len(svc.List(func(string) bool { return true })); n != 0 {
				t.Errorf("after %s: %d sessions live, want none (a fork's child is left)", c.name, n)
			}
		}
	})
}
