package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

// Two tenants: every phase alternates between them.
var keys = [2]struct{ name, key string }{{"alice", "soak-bench-key-alice"}, {"bob", "soak-bench-key-bob-0"}}

// server is one `pyexec serve` (fork server and warm pool on, the
// defaults) on a free loopback port, with both tenants' keys. Its data
// directory and cgroup parent outlive it, so that a restart finds the
// previous server's records and jails.
type server struct {
	*testserver.Server
}

// newServer prepares a server on a fresh data directory; Start runs it.
func newServer(binary string) (*server, error) {
	dir, err := testserver.DataDir("pyexec-bench-soak-")
	if err != nil {
		return nil, err
	}
	return &server{testserver.New(testserver.Config{Binary: binary, Dir: dir,
		CgroupParent: fmt.Sprintf("pyexec-bench-soak-%d", os.Getpid()),
		Flags: []string{"--log-level", "warn", "--prepare-base=false", "--warm-pool=true", "--fork-server=true",
			"--queue-size", "1000", "--api-keys", keys[0].name + ":" + keys[0].key + "," + keys[1].name + ":" + keys[1].key}})}, nil
}

// remove deletes the data directory and the cgroup parent's directories.
func (s *server) remove() {
	os.RemoveAll(s.Dir)
	_ = testserver.RemoveCgroups(s.CgroupParent)
}

// jailProcesses lists the host processes in a cgroup below the server's
// cgroup parent, as "pid command line".
func (s *server) jailProcesses() []string {
	return lines(testserver.Processes(testserver.InCgroup(s.CgroupParent)))
}

// jailCgroups lists the jail cgroups below the server's cgroup parent, in
// any hierarchy.
func (s *server) jailCgroups() []string { return testserver.JailCgroups(s.CgroupParent) }

// namedProcesses lists the host processes whose name starts with prefix
// (the evasion programs name theirs, and children inherit the name), as
// "pid command line".
func namedProcesses(prefix string) []string {
	return lines(testserver.Processes(func(p testserver.Process) bool { return strings.HasPrefix(p.Comm, prefix) }))
}

func lines(ps []testserver.Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
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
