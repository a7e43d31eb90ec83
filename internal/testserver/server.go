// Package testserver starts what the tests and the benchmarks run against:
// `pyexec serve` as a real process on a free loopback port, waiting until
// it answers /health (server.go); a NATS JetStream cluster of in-process
// servers for a fleet (cluster.go); and it collects what a run leaves
// behind — processes and cgroups below a cgroup parent, data directories
// (leftovers.go), and the mounts a killed server leaves below its data
// directory (mounts_linux.go). The e2e suite, the bench programs and, through the
// launcher in cmd/testserver, the Python and TypeScript suites share it.
//
// It serves tests and measurement tools only: nothing in the service may
// import it, and it never decides whether a test passed — it reports what
// it found and the caller asserts.
package testserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// DefaultTimeout is how long a server has to answer /health, and how long
// Stop waits after SIGTERM before it kills the server, unless the Config
// says otherwise.
const DefaultTimeout = 60 * time.Second

// Config is how a server is started: `Binary serve --port P --data-dir
// Dir --cgroup-parent CgroupParent Flags...` with Env.
type Config struct {
	// Binary is the pyexec binary (see Binary).
	Binary string
	// Dir is the data directory; it outlives Stop, so that a restart finds
	// the previous run's records (Close removes it).
	Dir string
	// CgroupParent holds the server's jails; empty leaves serve's default.
	CgroupParent string
	// Flags come after the port, data directory and cgroup parent, so
	// that they win.
	Flags []string
	// Env is the server's whole environment; nil is this process's.
	Env []string
	// StartTimeout and StopTimeout default to DefaultTimeout.
	StartTimeout, StopTimeout time.Duration
	// InTerminal runs the server in a terminal of its own (a pty) as the
	// terminal's foreground process group, as a developer who starts it by
	// hand does; Server.Terminal is then the terminal's master side, and
	// what the server writes to it goes to Logs.
	InTerminal bool
}

// Server is one `pyexec serve`. Start may be called again after Stop or
// Crash: the same configuration on a new port.
type Server struct {
	Config
	// URL is the server's base URL while it runs.
	URL string
	// Cmd is the process of the latest Start.
	Cmd *exec.Cmd
	// Logs is what that process wrote to stdout and stderr.
	Logs *LogBuffer
	// Exited is closed once that process has ended and been waited for.
	Exited <-chan struct{}
	// Terminal is the master side of the server's terminal (InTerminal):
	// what is written to it is typed there. It is closed once the server
	// and whatever held the terminal are gone.
	Terminal *os.File
}

// New prepares a server; Start runs it.
func New(cfg Config) *Server {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultTimeout
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultTimeout
	}
	return &Server{Config: cfg}
}

// Run prepares and starts a server.
func Run(ctx context.Context, cfg Config) (*Server, error) {
	s := New(cfg)
	return s, s.Start(ctx)
}

// RunInNewDir is Run on a fresh data directory (see DataDir) whose name
// starts with dirPrefix; the directory is removed again when the server
// does not come up, and by Close.
func RunInNewDir(ctx context.Context, dirPrefix string, cfg Config) (*Server, error) {
	dir, err := DataDir(dirPrefix)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	s, err := Run(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Start runs the server on a free loopback port and waits until it
// answers /health (Launch, then WaitHealthy). A server that could not
// listen because its port was taken after FreePort chose it (by another
// process, or as an outgoing connection's local port) is started again
// on another, at most three times in all.
func (s *Server) Start(ctx context.Context) error {
	for try := 1; ; try++ {
		if err := s.Launch(); err != nil {
			return err
		}
		err := s.WaitHealthy(ctx)
		if err == nil || try == 3 || !s.portTaken() {
			return err
		}
	}
}

// portTaken says the launched server has exited because its port was
// in use: serve listens before it starts anything else.
func (s *Server) portTaken() bool {
	select {
	case <-s.Exited:
		return strings.Contains(s.Logs.String(), "address already in use")
	default:
		return false
	}
}

// Launch runs the server on a free loopback port and returns at once.
func (s *Server) Launch() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	s.Logs = &LogBuffer{}
	exited := make(chan struct{})
	s.Exited = exited
	args := []string{"serve", "--port", strconv.Itoa(port), "--data-dir", s.Dir}
	if s.CgroupParent != "" {
		args = append(args, "--cgroup-parent", s.CgroupParent)
	}
	s.Cmd = exec.Command(s.Binary, append(args, s.Flags...)...)
	s.Cmd.Env = s.Env
	if err := s.start(); err != nil {
		return err
	}
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(exited)
	}(s.Cmd)
	return nil
}

// WaitHealthy waits until the launched server answers /health with 200,
// for at most StartTimeout. A server that exits meanwhile is an error
// carrying its output; one that does not answer in time is stopped.
func (s *Server) WaitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(s.StartTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.Exited:
			return fmt.Errorf("server exited during startup:\n%s", s.Logs)
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
	return fmt.Errorf("server not healthy after %s:\n%s", s.StartTimeout, s.Logs)
}

// start starts the process, its output going to Logs: directly, or
// through a new terminal whose session it leads (pty.Start: setsid and
// the terminal as its controlling one, so its process group is the
// terminal's foreground one). The terminal is read until nothing holds
// its other side: a full terminal would block the server's writes.
func (s *Server) start() error {
	if !s.InTerminal {
		s.Cmd.Stdout, s.Cmd.Stderr = s.Logs, s.Logs
		return s.Cmd.Start()
	}
	tty, err := pty.Start(s.Cmd)
	if err != nil {
		return err
	}
	s.Terminal = tty
	go func(logs *LogBuffer) {
		_, _ = io.Copy(logs, tty)
		tty.Close()
	}(s.Logs)
	return nil
}

// Stop ends the server gracefully (SIGTERM) and waits; one still running
// StopTimeout later is killed, and that is an error. Stopping a server
// that has ended already does nothing.
func (s *Server) Stop() error {
	select {
	case <-s.Exited:
		return nil
	default:
	}
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Exited:
	case <-time.After(s.StopTimeout):
		_ = s.Cmd.Process.Kill()
		<-s.Exited
		return fmt.Errorf("the server did not stop within %s of SIGTERM:\n%s", s.StopTimeout, s.Logs)
	}
	return nil
}

// Crash kills the server with SIGKILL, as an OOM kill or a power cut
// would, and waits for it.
func (s *Server) Crash() {
	_ = s.Cmd.Process.Kill()
	<-s.Exited
}

// Close stops the server and removes its data directory.
func (s *Server) Close() error {
	err := s.Stop()
	os.RemoveAll(s.Dir)
	return err
}

// Metrics reads every unlabelled metric the server's /metrics exposes.
func (s *Server) Metrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[name] = f
		}
	}
	return out, nil
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// RSS is the server's resident set size in bytes.
func (s *Server) RSS() (int64, error) { return ProcStatusBytes(s.Pid(), "VmRSS") }

// LogBuffer keeps a process's output; the process writes it while it
// runs.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
