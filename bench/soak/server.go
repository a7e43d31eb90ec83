package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyexec/pyexec/bench/internal/benchserver"
)

// Two tenants: every phase alternates between them.
var keys = [2]struct{ name, key string }{{"alice", "soak-bench-key-alice"}, {"bob", "soak-bench-key-bob-0"}}

// server is one `pyexec serve` (fork server and warm pool on, the
// defaults) on a free loopback port, with both tenants' keys. Its data
// directory and cgroup parent outlive it, so that a restart finds the
// previous server's records and jails.
type server struct {
	*benchserver.Server
	parent string
}

// newServer prepares a server on a fresh data directory; Start runs it.
func newServer(binary string) (*server, error) {
	parent := fmt.Sprintf("pyexec-bench-soak-%d", os.Getpid())
	s, err := benchserver.New(binary, "pyexec-bench-soak-", parent, "--log-level", "warn", "--prepare-base=false",
		"--warm-pool=true", "--fork-server=true", "--queue-size", "1000",
		"--api-keys", keys[0].name+":"+keys[0].key+","+keys[1].name+":"+keys[1].key)
	if err != nil {
		return nil, err
	}
	return &server{Server: s, parent: parent}, nil
}

// remove deletes the data directory and the cgroup parent's directories.
func (s *server) remove() {
	os.RemoveAll(s.Dir)
	for _, d := range benchserver.CgroupDirsNamed(s.parent) {
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
	for _, d := range benchserver.CgroupDirsNamed(s.parent) {
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
