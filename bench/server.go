package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is the pyexec under test.
type server struct {
	url  string
	cmd  *exec.Cmd
	dir  string
	logs bytes.Buffer
}

// startServer starts `pyexec serve` with extra flags (e.g.
// --fork-server=false) on a free loopback port.
func startServer(ctx context.Context, binary string, extra ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("/var/tmp", "pyexec-bench-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // jails mount environments from below it
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir}
	s.cmd = exec.CommandContext(ctx, binary, "serve", "--port", strconv.Itoa(port), "--data-dir", dir,
		"--cgroup-parent", cgroupParent(), "--queue-size", "1000", "--log-level", "warn",
		"--prepare-base=false")
	s.cmd.Args = append(s.cmd.Args, extra...)
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("server not healthy after 60s: %s", s.logs.String())
}

// cgroupParent holds the jails of every server this run starts.
func cgroupParent() string { return fmt.Sprintf("pyexec-bench-%d", os.Getpid()) }

// removeCgroupParent removes the cgroup parent's directories, in every v1
// hierarchy or the v2 tree, once every server has stopped: a server keeps
// the parent it was given, and each run has its own.
func removeCgroupParent() {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == cgroupParent() {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return nil
	})
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			fmt.Fprintln(os.Stderr, "bench: removing the cgroup parent:", err)
		}
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

// result is the part of an ExecutionResult the benchmark reads.
type result struct {
	ID       string `json:"execution_id"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Error    string `json:"error"`
}

// eval runs code through /api/v1/eval; see post.
func (s *server) eval(ctx context.Context, code string) (result, error) {
	body, _ := json.Marshal(map[string]any{"code": code})
	r, err := s.post(ctx, body)
	return r.result, err
}

// interpreter asks the server which python runs code by default, so the
// bare baseline spawns the very same binary.
func (s *server) interpreter(ctx context.Context) (string, error) {
	r, err := s.eval(ctx, "import sys; print(sys.executable)")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(r.Stdout), nil
}

// rssBytes is the server process's resident set size.
func (s *server) rssBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
}

// cpu is the CPU time the server process has used so far.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ") // the command name may hold spaces
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}

// metric reads one unlabelled metric from /metrics.
func (s *server) metric(ctx context.Context, name string) (float64, error) {
	all, err := s.poolCounters(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range strings.Split(all, "; ") {
		if v, ok := strings.CutPrefix(m, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// poolCounters reads the warm pool's counters from /metrics.
func (s *server) poolCounters(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "pyexec_pool_") {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return "off", nil
	}
	return strings.Join(parts, "; "), nil
}
