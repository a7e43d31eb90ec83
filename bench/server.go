package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

// server is the pyexec under test.
type server struct {
	*testserver.Server
	// client keeps a connection per concurrent request alive, as an
	// agent's client does; http.DefaultClient keeps two per host, so at
	// c=8 most requests paid a new TCP connection that the bare spawns
	// they are compared with do not.
	client *http.Client
}

// maxConns is the most connections a bench server is kept by its client:
// above the highest concurrency any scenario runs at (32).
const maxConns = 64

// startServer starts `pyexec serve` with extra flags (e.g.
// --fork-server=false) on a free loopback port.
func startServer(ctx context.Context, binary string, extra ...string) (*server, error) {
	// The pandas environment the rich scenarios ask for is the base
	// environment: only those fork (pool.Config.TrustedMount).
	flags := append([]string{"--queue-size", "1000", "--log-level", "warn", "--prepare-base=false", "--base-packages", "pandas,matplotlib"}, extra...)
	s, err := testserver.RunInNewDir(ctx, "pyexec-bench-", testserver.Config{Binary: binary, CgroupParent: cgroupParent(), Flags: flags})
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = maxConns, maxConns
	return &server{Server: s, client: &http.Client{Transport: t}}, nil
}

// cgroupParent holds the jails of every server this run starts.
func cgroupParent() string { return fmt.Sprintf("pyexec-bench-%d", os.Getpid()) }

// removeCgroupParent removes the cgroup parent's directories, in every v1
// hierarchy or the v2 tree, once every server has stopped: a server keeps
// the parent it was given, and each run has its own.
func removeCgroupParent() {
	if err := testserver.RemoveCgroups(cgroupParent()); err != nil {
		fmt.Fprintln(os.Stderr, "bench: removing the cgroup parent:", err)
	}
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

// cpu is the CPU time the server process has used so far.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
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
