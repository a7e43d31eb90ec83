package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
)

// stopTimeout is the --shutdown-timeout of the teardown tests; stopBound
// is how long after SIGTERM the server must be gone: the drain, the
// server's kill grace (10s) for the rest, and slack for a loaded machine.
const (
	stopTimeout = 3 * time.Second
	stopBound   = stopTimeout + 10*time.Second + 5*time.Second
)

// TestSIGTERMLeavesNothing: a server holding warm jails, a fork server
// with forked executions, a live session and running sync and async
// executions exits within its shutdown bound after SIGTERM, with no
// process and no jail cgroup of it left, and every execution that was
// running has a final record.
func TestSIGTERMLeavesNothing(t *testing.T) {
	needRoot(t)
	parent := ownCgroupParent(t, "stop")
	data := t.TempDir()
	s, c, busy := busyServer(t, data, parent)

	t0 := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(stopBound):
		t.Fatalf("server still running %s after SIGTERM:\n%s", stopBound, s.logs)
	}
	took := time.Since(t0)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0:\n%s", code, s.logs)
	}
	t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
	if left := processesUnder(parent); len(left) > 0 {
		t.Errorf("processes left after SIGTERM: %v", left)
	}
	if left := cgroupsUnder(parent); len(left) > 0 {
		t.Errorf("jail cgroups left after SIGTERM: %v", left)
	}
	if l := logLines(s, "still running at exit"); l != "" {
		t.Errorf("the orderly teardown left jails for the final sweep: %s", l)
	}

	// The sync caller got its final state before the server went away.
	select {
	case r := <-busy.sync:
		if r.err != nil || r.res.Status != client.StatusFailed || r.res.Reason != client.ReasonNodeLost || !strings.Contains(r.res.Stdout, "sync started") {
			t.Errorf("sync execution at shutdown: %v %+v", r.err, r.res)
		}
	case <-time.After(10 * time.Second):
		t.Error("the sync caller got no answer")
	}

	s = startServer(t, data, "--cgroup-parent", parent)
	c = client.New(s.url)
	lost, err := c.GetExecution(context.Background(), busy.async)
	if err != nil {
		t.Fatal(err)
	}
	if lost.Status != client.StatusFailed || lost.Reason != client.ReasonNodeLost || !strings.Contains(lost.Stdout, "async started") {
		t.Errorf("async execution running at SIGTERM, after a restart: status %s reason %q stdout %q", lost.Status, lost.Reason, lost.Stdout)
	}
	if l := logLines(s, "removed jails left by a previous run"); l != "" {
		t.Errorf("the restarted server found jails of the stopped one: %s", l)
	}
}

// TestKillRestartSweeps: after kill -9 the jails' processes die with the
// server, and a new server on the same data dir removes the old one's
// jail cgroups before it serves; a SIGTERM then leaves nothing at all.
func TestKillRestartSweeps(t *testing.T) {
	needRoot(t)
	parent := ownCgroupParent(t, "crash")
	data := t.TempDir()
	s, _, busy := busyServer(t, data, parent)
	oldCgroups := cgroupsUnder(parent)
	oldProcs := processesUnder(parent)

	s.crash()
	eventually(t, 10*time.Second, "the crashed server's jail processes to die with it", func() bool {
		return len(processesUnder(parent)) == 0
	})
	select {
	case <-busy.sync: // its connection broke: nothing to check
	case <-time.After(10 * time.Second):
		t.Error("the sync caller was not released by the crash")
	}

	s = startServer(t, data, "--cgroup-parent", parent)
	for _, cg := range cgroupsUnder(parent) {
		if slices.Contains(oldCgroups, cg) {
			t.Errorf("jail cgroup of the crashed server still there after the restart: %s", cg)
		}
	}
	for _, p := range processesUnder(parent) {
		if slices.Contains(oldProcs, p) {
			t.Errorf("process of the crashed server still running after the restart: %s", p)
		}
	}
	if logLines(s, "removed jails left by a previous run") == "" {
		t.Errorf("the restarted server did not report sweeping the old jails")
	}
	lost, err := client.New(s.url).GetExecution(context.Background(), busy.async)
	if err != nil || lost.Status != client.StatusFailed || lost.Reason != client.ReasonNodeLost {
		t.Errorf("async execution running at kill -9, after a restart: %v %+v", err, lost)
	}

	s.stop(t)
	if left := processesUnder(parent); len(left) > 0 {
		t.Errorf("processes left after the restarted server's SIGTERM: %v", left)
	}
	if left := cgroupsUnder(parent); len(left) > 0 {
		t.Errorf("jail cgroups left after the restarted server's SIGTERM: %v", left)
	}
}

// TestSecondSignalForcesStop: with a long shutdown timeout, a second
// SIGTERM stops the running executions at once; they still get their final
// state and nothing is left.
func TestSecondSignalForcesStop(t *testing.T) {
	needRoot(t)
	parent := ownCgroupParent(t, "force")
	s, _, busy := busyServer(t, t.TempDir(), parent, "--shutdown-timeout", "300")

	t0 := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	select {
	case <-s.waited:
		t.Fatalf("the server did not wait for its running executions:\n%s", s.logs)
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(stopBound):
		t.Fatalf("server still running %s after a second SIGTERM:\n%s", stopBound, s.logs)
	}
	t.Logf("stopped %s after the first SIGTERM", time.Since(t0).Round(time.Millisecond))
	select {
	case r := <-busy.sync:
		if r.err != nil || r.res.Status != client.StatusFailed || r.res.Reason != client.ReasonNodeLost {
			t.Errorf("sync execution at a forced stop: %v %+v", r.err, r.res)
		}
	case <-time.After(10 * time.Second):
		t.Error("the sync caller got no answer")
	}
	if left := processesUnder(parent); len(left) > 0 {
		t.Errorf("processes left after a forced stop: %v", left)
	}
	if left := cgroupsUnder(parent); len(left) > 0 {
		t.Errorf("jail cgroups left after a forced stop: %v", left)
	}
}

// logLines returns the lines of s's log that contain text, joined.
func logLines(s *server, text string) string {
	var out []string
	for l := range strings.Lines(s.logs.String()) {
		if strings.Contains(l, text) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "; ")
}

// busy is what busyServer left running.
type busy struct {
	async string          // a running async execution
	sync  chan syncResult // the answer to a running sync execution
}

type syncResult struct {
	res *client.ExecutionResult
	err error
}

// busyServer starts a server under parent with the warm pool and one fork
// server, and gives it everything a server holds: a forking kind (a fork
// server and its forked warm executions), a kind of plain warm jails (the
// fork server bound is reached), a live session, and a sync and an async
// execution that run until they are stopped. It checks that they exist.
// It has no base environment: what it holds does not depend on one, and
// where the environments are not built yet (a fresh env dir, the test VM,
// which has no uv and no network) its build made the session wait minutes.
func busyServer(t *testing.T, data, parent string, args ...string) (*server, *client.Client, busy) {
	t.Helper()
	args = append([]string{"--cgroup-parent", parent, "--shutdown-timeout", fmt.Sprint(int(stopTimeout.Seconds())),
		"--warm-pool", "--fork-server", "--fork-servers", "1", "--pool-per-kind", "2", "--base-packages", "-"}, args...)
	t0 := time.Now()
	s := startServer(t, data, args...)
	c := client.New(s.url)
	ctx := context.Background()
	phases := []string{fmt.Sprintf("started in %s", time.Since(t0).Round(time.Millisecond))}
	phase := func(what string) {
		phases = append(phases, fmt.Sprintf("%s %s", what, time.Since(t0).Round(time.Millisecond)))
	}
	// The first kind takes the one fork server; a second interpreter's
	// kind gets warm jails of its own.
	kinds := 0
	for _, v := range []string{"", "3.11", "3.13", "3.10", "3.9"} {
		ok := true
		for range 2 {
			r, err := c.Eval(ctx, &client.SimpleExecRequest{Code: "print('warm')", PythonVersion: v})
			if err != nil || r.Status != client.StatusCompleted {
				ok = false
				break
			}
		}
		if ok {
			kinds++
		}
		if kinds == 2 {
			break
		}
	}
	if kinds < 2 {
		t.Log("only one interpreter here: no kind of plain warm jails")
	}
	phase("two kinds evaluated at")
	if _, err := c.CreateSession(ctx, &client.SessionRequest{}); err != nil {
		t.Fatal(err)
	}
	phase("a session at")
	id, err := c.ExecuteAsync(ctx, mustTar(t, map[string]string{"main.py": "import time\nprint('async started', flush=True)\ntime.sleep(280)\n"}),
		&client.Metadata{Config: &client.ExecutionConfig{TimeoutSeconds: 300}})
	if err != nil {
		t.Fatal(err)
	}
	b := busy{async: id, sync: make(chan syncResult, 1)}
	go func() {
		r, err := c.Eval(context.Background(), &client.SimpleExecRequest{
			Code:   "import time\nprint('sync started', flush=True)\ntime.sleep(280)\n",
			Config: &client.ExecutionConfig{TimeoutSeconds: 300}})
		b.sync <- syncResult{r, err}
	}()
	eventually(t, 60*time.Second, "the async and sync executions to run", func() bool {
		r, err := c.GetExecution(ctx, id)
		if err != nil || r.Status != client.StatusRunning {
			return false
		}
		list, err := c.ListExecutions(ctx, client.ListOptions{Status: client.StatusRunning})
		return err == nil && len(list.Executions) == 2
	})
	phase("the sync and async executions running at")
	// A session, a fork server, forked executions, warm jails, two runs.
	eventually(t, 60*time.Second, "the pool to hold its warm jails", func() bool {
		return len(cgroupsUnder(parent)) >= 6
	})
	phase("the warm jails at")
	// Where a busy server's start goes (make test-vm's emulation
	// multiplies each part differently).
	t.Log("busy server: " + strings.Join(phases, ", "))
	if len(processesUnder(parent)) == 0 {
		t.Fatal("no jail process found under the server's cgroup parent: the test could not see a leak")
	}
	return s, c, b
}

// ownCgroupParent is a cgroup parent for one test's servers, removed (with
// its empty directories in every hierarchy) when the test ends.
func ownCgroupParent(t *testing.T, name string) string {
	parent := fmt.Sprintf("%s-%s", cgroupParent, name)
	t.Cleanup(func() {
		for _, d := range cgroupDirsNamed(parent) {
			_ = os.Remove(d)
		}
	})
	return parent
}

// cgroupDirsNamed lists the directories called name in every cgroup
// hierarchy (v1) or the v2 tree.
func cgroupDirsNamed(name string) []string { return testserver.CgroupDirsNamed(name) }

// cgroupsUnder lists the jail cgroups below parent, in any hierarchy.
func cgroupsUnder(parent string) []string { return testserver.JailCgroups(parent) }

// processesUnder lists the host processes in a cgroup below parent, as
// "pid command line".
func processesUnder(parent string) []string {
	var left []string
	for _, p := range testserver.Processes(testserver.InCgroup(parent)) {
		left = append(left, p.String())
	}
	return left
}
