package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Two tenants: every phase alternates between them.
var keys = [2]struct{ name, key string }{{"alice", "soak-bench-key-alice"}, {"bob", "soak-bench-key-bob-0"}}

// server is one `pyexec serve` on a free loopback port. Its data directory
// and cgroup parent outlive it, so that a restart finds the previous
// server's records and jails.
type server struct {
	binary, dir, parent string
	url                 string
	cmd                 *exec.Cmd
	logs                *logBuffer
	waited              chan struct{}
}

// logBuffer keeps the server's output for error messages.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newServer prepares a server on a fresh data directory; start runs it.
func newServer(binary string) (*server, error) {
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-bench-soak-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // jails mount environments from below it
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{binary: binary, dir: dir, parent: fmt.Sprintf("pyexec-bench-soak-%d", os.Getpid())}, nil
}

// start runs the server (fork server and warm pool on, the defaults) and
// waits until it answers /health.
func (s *server) start(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	s.logs = &logBuffer{}
	s.waited = make(chan struct{})
	s.cmd = exec.Command(s.binary, "serve", "--port", strconv.Itoa(port), "--data-dir", s.dir,
		"--cgroup-parent", s.parent, "--log-level", "warn", "--prepare-base=false",
		"--warm-pool=true", "--fork-server=true", "--queue-size", "1000",
		"--api-keys", keys[0].name+":"+keys[0].key+","+keys[1].name+":"+keys[1].key)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.waited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.waited:
			return fmt.Errorf("server exited during startup: %s", s.logs)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server not healthy after 60s: %s", s.logs)
}

// crash kills the server with SIGKILL, as an OOM kill or a power cut would.
func (s *server) crash() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.waited
}

// stop ends the server gracefully (SIGTERM) and waits.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.waited
		return errors.New("the server did not stop within 60s of SIGTERM")
	}
	return nil
}

// remove deletes the data directory and the cgroup parent's directories.
func (s *server) remove() {
	os.RemoveAll(s.dir)
	for _, d := range cgroupDirsNamed(s.parent) {
		_ = os.Remove(d)
	}
}

// jailProcesses lists the host processes in a cgroup below the server's
// cgroup parent, as "pid command line".
func (s *server) jailProcesses() []string {
	return processes(func(pid string) bool {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
		return err == nil && strings.Contains(string(b), "/"+s.parent+"/")
	})
}

// jailCgroups lists the jail cgroups below the server's cgroup parent, in
// any hierarchy.
func (s *server) jailCgroups() []string {
	var left []string
	for _, d := range cgroupDirsNamed(s.parent) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				left = append(left, filepath.Join(d, e.Name()))
			}
		}
	}
	return left
}

// namedProcesses lists the host processes whose name starts with prefix
// (the evasion programs name theirs, and children inherit the name).
func namedProcesses(prefix string) []string {
	return processes(func(pid string) bool {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		return err == nil && strings.HasPrefix(string(b), prefix)
	})
}

func processes(match func(pid string) bool) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || !match(e.Name()) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, e.Name()+" "+strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return found
}

// cgroupDirsNamed lists the directories called name in every cgroup
// hierarchy (v1) or the v2 tree.
func cgroupDirsNamed(name string) []string {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	return dirs
}

// waitFor polls cond every 50ms until it holds or timeout passes, and
// reports how long it took and whether it held.
func waitFor(timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), true
}
