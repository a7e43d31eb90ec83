package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

// binary is the pyexec binary built once for the whole package
// ($PYEXEC_BINARY when set, see testserver.Binary).
var binary string

// cgroupParent keeps the e2e servers' jails apart from jails that other
// packages' tests build at the same time.
var cgroupParent = fmt.Sprintf("pyexec-e2e-%d", os.Getpid())

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "pyexec-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary, err = testserver.Binary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	_ = testserver.RemoveCgroups(cgroupParent)
	return code
}

// needRoot skips tests that start real jails.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server builds jails (CI runs as root)")
	}
}

// server is a running `pyexec serve` process (a testserver.Server under
// the names these tests use).
type server struct {
	url    string
	cmd    *exec.Cmd
	logs   *testserver.LogBuffer
	waited <-chan struct{}
	// dataDir, env and args are what it was started with (a restart
	// starts it again with them).
	dataDir string
	env     []string
	args    []string
	ts      *testserver.Server
	// crashed says the server was killed (crash): it may leave mounts.
	crashed bool
}

// cleanEnv is the environment of every process the tests start: nothing
// of the developer's PYEXEC_* settings.
func cleanEnv(extra ...string) []string { return testserver.CleanEnv(extra...) }

func freePort(t *testing.T) int {
	t.Helper()
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startServer starts `pyexec serve` on dataDir and waits until /health
// answers. The server is stopped when the test ends. It builds no base
// environment and fetches no tool unless args say otherwise (later flags
// win).
func startServer(t *testing.T, dataDir string, args ...string) *server {
	t.Helper()
	return startServerEnv(t, dataDir, cleanEnv(), args...)
}

// startServerEnv is startServer with the server's whole environment.
// startTimeout bounds a server's start until /health answers: a second
// natively, but 25 to 40 s under emulation (make test-vm) beside another
// suite.
const startTimeout = 2 * time.Minute

func startServerEnv(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	return startServerWithin(t, startTimeout, dataDir, env, args...)
}

// startServerWithin is startServerEnv failing unless /health answers
// within d.
func startServerWithin(t *testing.T, d time.Duration, dataDir string, env []string, args ...string) *server {
	t.Helper()
	ts := testserver.New(testserver.Config{Binary: binary, Dir: dataDir, CgroupParent: cgroupParent, Env: env,
		Flags:        append([]string{"--prepare-base=false", "--provision-tools=false"}, args...),
		StartTimeout: d, StopTimeout: 45 * time.Second})
	err := ts.Start(context.Background())
	if ts.Cmd == nil || ts.Cmd.Process == nil {
		t.Fatal(err)
	}
	s := &server{url: ts.URL, cmd: ts.Cmd, logs: ts.Logs, waited: ts.Exited, dataDir: dataDir, env: env, args: args, ts: ts}
	t.Cleanup(func() {
		s.stop(t)
		s.releaseMounts(t)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stop ends the server gracefully (SIGTERM) and waits.
func (s *server) stop(t *testing.T) {
	if err := s.ts.Stop(); err != nil {
		t.Error(err)
	}
}

// crash kills the server with SIGKILL, as a power cut or OOM kill would.
func (s *server) crash() {
	s.crashed = true
	s.ts.Crash()
}

// releaseMounts detaches what the server left mounted below its data
// directory, so that the directory can be removed. Only a killed server
// leaves anything there (its workspace slots, its runs' tmpfs, which its
// next start would sweep); one stopped gracefully unmounts what it
// mounted, and anything left is an error.
func (s *server) releaseMounts(t *testing.T) {
	left, err := testserver.UnmountBelow(s.dataDir)
	if err != nil {
		t.Errorf("unmounting what the server left below %s: %v", s.dataDir, err)
	}
	switch {
	case len(left) > 0 && !s.crashed:
		t.Errorf("a server stopped gracefully left mounted: %q", left)
	case len(left) > 0:
		t.Logf("detached what the killed server left mounted: %q", left)
	}
}

// cliResult is one CLI invocation's outcome.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the pyexec CLI against url with stdin.
func cli(t *testing.T, url, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = cleanEnv("PYEXEC_SERVER=" + url)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running pyexec %v: %v", args, err)
	}
	return cliResult{out.String(), errOut.String(), code}
}

// jailProcesses lists host processes still inside a jail cgroup of the
// e2e servers; with comm set, only those of that name.
func jailProcesses(comm string) []string {
	var left []string
	for _, p := range testserver.Processes(testserver.InCgroup(cgroupParent)) {
		if comm == "" || p.Comm == comm {
			left = append(left, fmt.Sprint(p.Pid))
		}
	}
	return left
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
