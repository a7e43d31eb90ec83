// Package benchserver runs `pyexec serve` for the bench programs: on a free
// loopback port, with a data directory of its own that jails can enter,
// waiting until it answers /health; it stops the server and reads the
// memory figures of a process from /proc. It serves measurement tools
// only: nothing in the service may import it.
package benchserver

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

// startTimeout is how long a server has to answer /health, and how long
// Stop waits after SIGTERM before it kills the server.
const startTimeout = 60 * time.Second

// Server is one `pyexec serve`. Its data directory and cgroup parent
// outlive a stop, so that a restart finds the previous run's records and
// jails.
type Server struct {
	// URL is the server's base URL while it runs.
	URL string
	// Dir is the data directory.
	Dir string

	binary, parent string
	flags          []string
	cmd            *exec.Cmd
	logs           *logBuffer
	waited         chan struct{}
}

// New prepares a server on a fresh data directory under /var/tmp whose
// name starts with dirPrefix; Start runs it with --cgroup-parent parent
// and flags.
func New(binary, dirPrefix, parent string, flags ...string) (*Server, error) {
	dir, err := os.MkdirTemp("/var/tmp", dirPrefix)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // jails mount environments from below it
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{Dir: dir, binary: binary, parent: parent, flags: flags}, nil
}

// Run prepares and starts a server, removing its data directory again
// when it does not come up; Close undoes it.
func Run(ctx context.Context, binary, dirPrefix, parent string, flags ...string) (*Server, error) {
	s, err := New(binary, dirPrefix, parent, flags...)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		os.RemoveAll(s.Dir)
		return nil, err
	}
	return s, nil
}

// Start runs the server on a free loopback port and waits until it
// answers /health. A server that does not is stopped.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	s.logs = &logBuffer{}
	s.waited = make(chan struct{})
	s.cmd = exec.Command(s.binary, "serve", "--port", strconv.Itoa(port), "--data-dir", s.Dir,
		"--cgroup-parent", s.parent)
	s.cmd.Args = append(s.cmd.Args, s.flags...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.waited)
	}()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.waited:
			return fmt.Errorf("server exited during startup: %s", s.logs)
		case <-ctx.Done():
			_ = s.Stop()
			return ctx.Err()
		default:
		}
		if resp, err := http.Get(s.URL + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = s.Stop()
	return fmt.Errorf("server not healthy after %.0fs: %s", startTimeout.Seconds(), s.logs)
}

// Stop ends the server gracefully (SIGTERM) and waits; one that is still
// running a minute later is killed.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(startTimeout):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.waited
		return fmt.Errorf("the server did not stop within %.0fs of SIGTERM", startTimeout.Seconds())
	}
	return nil
}

// Close stops the server and removes its data directory.
func (s *Server) Close() error {
	err := s.Stop()
	os.RemoveAll(s.Dir)
	return err
}

// Crash kills the server with SIGKILL, as an OOM kill or a power cut
// would, and waits for it.
func (s *Server) Crash() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.waited
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// RSS is the server's resident set size in bytes.
func (s *Server) RSS() (int64, error) { return ProcStatusBytes(s.Pid(), "VmRSS") }

// ProcStatusBytes reads a field given in kB (VmRSS, VmHWM...) of
// /proc/<pid>/status, in bytes.
func ProcStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
}

// CgroupDirsNamed lists the directories called name in every cgroup
// hierarchy (v1) or the v2 tree.
func CgroupDirsNamed(name string) []string {
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

// logBuffer keeps the server's output for error messages; the server
// writes it while it runs.
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
