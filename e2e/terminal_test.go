package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
	"golang.org/x/sys/unix"
)

// ttyServer is a `pyexec serve` started in a terminal of its own, as the
// terminal's foreground process group: as `make run` or a developer starts
// it by hand.
type ttyServer struct {
	*testserver.Server
}

// startTTYServer starts `pyexec serve` on data in a new terminal and waits
// until /health answers. It checks that the server is the terminal's
// foreground process group, the one the terminal sends Ctrl-C's SIGINT to.
func startTTYServer(t *testing.T, data, parent string, args ...string) *ttyServer {
	t.Helper()
	ts := testserver.New(testserver.Config{Binary: binary, Dir: data, CgroupParent: parent, Env: cleanEnv(),
		Flags: append([]string{"--prepare-base=false", "--provision-tools=false"}, args...), InTerminal: true,
		StartTimeout: startTimeout, StopTimeout: 45 * time.Second})
	err := ts.Start(context.Background())
	if ts.Cmd != nil && ts.Cmd.Process != nil {
		t.Cleanup(func() {
			if err := ts.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if fg, err := foreground(ts.Terminal); err != nil || fg != ts.Pid() {
		t.Fatalf("the terminal's foreground process group is %d (%v), want the server's %d", fg, err, ts.Pid())
	}
	return &ttyServer{ts}
}

// foreground is the foreground process group of the terminal tty.
func foreground(tty *os.File) (int, error) {
	rc, err := tty.SyscallConn()
	if err != nil {
		return 0, err
	}
	var pgrp int
	var ioErr error
	if err := rc.Control(func(fd uintptr) { pgrp, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) }); err != nil {
		return 0, err
	}
	return pgrp, ioErr
}

// ctrlC types Ctrl-C in the server's terminal: the terminal sends SIGINT
// to its foreground process group.
func (s *ttyServer) ctrlC(t *testing.T) {
	t.Helper()
	if _, err := s.Terminal.Write([]byte{0x03}); err != nil {
		t.Fatalf("typing Ctrl-C: %v", err)
	}
}

// runningEval starts a sync eval of code on s and waits until its payload
// runs in its jail: until it printed "started" (the record is running from
// its admission on, before a jail may be ready for it). Its answer comes on
// the returned channel.
func (s *ttyServer) runningEval(t *testing.T, code string, timeout int) <-chan syncResult {
	t.Helper()
	c := client.New(s.URL)
	ch := make(chan syncResult, 1)
	go func() {
		r, err := c.Eval(context.Background(), &client.SimpleExecRequest{Code: code,
			Config: &client.ExecutionConfig{TimeoutSeconds: timeout}})
		ch <- syncResult{r, err}
	}()
	var id string
	eventually(t, 60*time.Second, "the execution to run", func() bool {
		list, err := c.ListExecutions(context.Background(), client.ListOptions{Status: client.StatusRunning})
		if err != nil || len(list.Executions) != 1 {
			return false
		}
		id = list.Executions[0].ExecutionID
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ev, err := range c.Follow(ctx, id) {
		if err != nil {
			t.Fatalf("following %s: %v", id, err)
		}
		if ev.Type == client.EventStdout && strings.Contains(ev.Data, "started") {
			return ch
		}
	}
	t.Fatalf("%s ended before it printed", id)
	return nil
}

// noJailOfTheTerminal checks that no process of the server's jails is in
// the terminal's foreground process group or has it as its controlling
// terminal's: only the server itself hears what is typed.
func (s *ttyServer) noJailOfTheTerminal(t *testing.T, parent string) {
	t.Helper()
	fg := s.Pid()
	jails := processesUnder(parent)
	if len(jails) == 0 {
		t.Fatal("no jail process found under the server's cgroup parent: the test could not see one in the terminal")
	}
	for _, p := range jails {
		pid, _, _ := strings.Cut(p, " ")
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// After the command name: state ppid pgrp session tty_nr tpgid.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 5 && (f[2] == fmt.Sprint(fg) || f[5] == fmt.Sprint(fg)) {
			t.Errorf("jail process %s is in the terminal's foreground process group (pgrp %s, tpgid %s)", p, f[2], f[5])
		}
	}
}

// TestCtrlCLetsRunningExecutionsFinish: Ctrl-C in the terminal of a
// foreground `pyexec serve` is its first SIGINT, and the server's alone:
// an execution running for 3 s completes with exit code 0 within the
// shutdown timeout (its jail, in a session of its own, never sees the
// terminal's signal), and the server then exits leaving nothing behind.
// Forked from a fork server (the default), in warm jails, and cold.
func TestCtrlCLetsRunningExecutionsFinish(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"forked", nil},
		{"warm", []string{"--fork-server=false"}},
		{"cold", []string{"--warm-pool=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := ownCgroupParent(t, "ctrlc-"+c.name)
			s := startTTYServer(t, t.TempDir(), parent, append([]string{"--shutdown-timeout", "30"}, c.args...)...)
			answer := s.runningEval(t, "import time\nprint('started', flush=True)\ntime.sleep(3)\nprint('done')\n", 60)
			s.noJailOfTheTerminal(t, parent)
			t0 := time.Now()
			s.ctrlC(t)
			select {
			case r := <-answer:
				if r.err != nil || r.res.Status != client.StatusCompleted || r.res.ExitCode != 0 || r.res.Stdout != "started\ndone\n" {
					t.Errorf("the running execution after Ctrl-C: %v %+v; want completed, exit 0, all its output", r.err, r.res)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer within the shutdown timeout of Ctrl-C:\n%s", s.Logs)
			}
			select {
			case <-s.Exited:
			case <-time.After(stopBound):
				t.Fatalf("server still running %s after its execution ended:\n%s", stopBound, s.Logs)
			}
			t.Logf("stopped %s after Ctrl-C", time.Since(t0).Round(time.Millisecond))
			if !strings.Contains(s.Logs.String(), "stopping: no new work") || !strings.Contains(s.Logs.String(), "signal=interrupt") {
				t.Errorf("the server did not log a stop on SIGINT:\n%s", s.Logs)
			}
			nothingLeft(t, parent, "the stop")
		})
	}
}

// TestSecondCtrlCForcesStop: with a long shutdown timeout, the first
// Ctrl-C leaves a running execution running; a second stops it at once,
// recorded as failed/node_lost, and the server exits leaving nothing
// behind.
func TestSecondCtrlCForcesStop(t *testing.T) {
	needRoot(t)
	parent := ownCgroupParent(t, "ctrlc-force")
	s := startTTYServer(t, t.TempDir(), parent, "--shutdown-timeout", "300")
	answer := s.runningEval(t, "import time\nprint('started', flush=True)\ntime.sleep(280)\n", 300)
	t0 := time.Now()
	s.ctrlC(t)
	select {
	case <-s.Exited:
		t.Fatalf("the server did not wait for its running execution after one Ctrl-C:\n%s", s.Logs)
	case r := <-answer:
		t.Fatalf("the running execution ended at the first Ctrl-C: %v %+v", r.err, r.res)
	case <-time.After(2 * time.Second):
	}
	s.ctrlC(t)
	select {
	case <-s.Exited:
	case <-time.After(stopBound):
		t.Fatalf("server still running %s after a second Ctrl-C:\n%s", stopBound, s.Logs)
	}
	t.Logf("stopped %s after the first Ctrl-C", time.Since(t0).Round(time.Millisecond))
	select {
	case r := <-answer:
		if r.err != nil || r.res.Status != client.StatusFailed || r.res.Reason != client.ReasonNodeLost {
			t.Errorf("the running execution at a forced stop: %v %+v; want failed/node_lost", r.err, r.res)
		}
	case <-time.After(10 * time.Second):
		t.Error("the sync caller got no answer")
	}
	if !strings.Contains(s.Logs.String(), "second signal") {
		t.Errorf("the server did not log the forced stop:\n%s", s.Logs)
	}
	nothingLeft(t, parent, "a forced stop")
}

// nothingLeft checks that no process and no jail cgroup is left under
// parent after what ended the server.
func nothingLeft(t *testing.T, parent, after string) {
	t.Helper()
	if left := processesUnder(parent); len(left) > 0 {
		t.Errorf("processes left after %s: %v", after, left)
	}
	if left := cgroupsUnder(parent); len(left) > 0 {
		t.Errorf("jail cgroups left after %s: %v", after, left)
	}
}
