package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the pyexec binary built once for the whole package.
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
	binary = filepath.Join(dir, "pyexec")
	build := exec.Command("go", "build", "-o", binary, "../cmd/pyexec")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building pyexec:", err)
		return 1
	}
	code := m.Run()
	removeCgroupParents()
	return code
}

// removeCgroupParents removes the (empty) cgroup parents the servers made.
func removeCgroupParents() {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == cgroupParent {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}

// needRoot skips tests that start real jails.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server builds jails (CI runs as root)")
	}
}

// server is a running `pyexec serve` process.
type server struct {
	url    string
	cmd    *exec.Cmd
	logs   *syncBuffer
	waited chan struct{}
	// dataDir, env and args are what it was started with (a restart
	// starts it again with them).
	dataDir string
	env     []string
	args    []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cleanEnv is the environment of every process the tests start: nothing
// of the developer's PYEXEC_* settings.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PYEXEC_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
func startServerEnv(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	port := freePort(t)
	argv := append([]string{"serve", "--port", fmt.Sprint(port), "--data-dir", dataDir, "--cgroup-parent", cgroupParent,
		"--prepare-base=false", "--provision-tools=false"}, args...)
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port), logs: &syncBuffer{}, waited: make(chan struct{}),
		dataDir: dataDir, env: env, args: args}
	s.cmd = exec.Command(binary, argv...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.waited)
	}()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.waited:
			t.Fatalf("server exited during startup:\n%s", s.logs)
		default:
		}
		resp, err := http.Get(s.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server not healthy after 30s:\n%s", s.logs)
	return nil
}

// stop ends the server gracefully (SIGTERM) and waits.
func (s *server) stop(t *testing.T) {
	select {
	case <-s.waited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(45 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.waited
		t.Errorf("server did not stop within 45s of SIGTERM:\n%s", s.logs)
	}
}

// crash kills the server with SIGKILL, as a power cut or OOM kill would.
func (s *server) crash() {
	_ = s.cmd.Process.Kill()
	<-s.waited
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
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(b), "/"+cgroupParent+"/") {
			continue
		}
		if c, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); comm == "" || strings.TrimSpace(string(c)) == comm {
			left = append(left, e.Name())
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
