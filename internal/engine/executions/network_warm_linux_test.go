package executions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pool"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// pyFetchBoth fetches allowed.test and other.test over HTTP and prints
// each page's first line, or the exception that stopped it.
const pyFetchBoth = `
import urllib.request
for host in ("allowed.test", "other.test"):
    try:
        print(host + "=" + urllib.request.urlopen("http://" + host + "/", timeout=10).read()[:40].decode().strip())
    except Exception as e:
        print(host + "=" + type(e).__name__)
`

// TestNetworkWarmPath: executions with network through the engine and the
// warm pool, in the closed test world. Each is served by a warm jail (the
// pool counts it), reaches what its own allow list lets through and
// nothing the previous execution's list allowed, gets a secret
// substituted as on the cold path, and leaves nothing behind: no TUN
// device or network namespace held by the server once it ended, no jail
// once the pool is closed.
func TestNetworkWarmPath(t *testing.T) {
	if ranIsolated(t) {
		return
	}
	w := egresstest.New(t)
	t.Run("warm jails", func(t *testing.T) { networkWarmPath(t, w, false) })
	t.Run("forked", func(t *testing.T) { networkWarmPath(t, w, true) })
}

// networkWarmPath is TestNetworkWarmPath with warm jails or (fork) a fork
// server.
func networkWarmPath(t *testing.T, w *egresstest.World, fork bool) {
	parent := fmt.Sprintf("pyexec-netwarm-%d-%v", os.Getpid(), fork)
	t.Cleanup(func() { // after the pool and its jails are closed
		if left := jailCgroupsUnder(parent); len(left) > 0 {
			t.Errorf("jails left after the pool closed: %v", left)
		}
		removeCgroupDirs(parent)
	})
	held := heldNetworkFiles() // the test world's
	e, p := warmNetworkEngine(t, w, parent, fork)
	ctx := context.Background()
	fetch := func(allow ...string) run.Request {
		r := py(pyFetchBoth)
		r.Network, r.NetworkAllow = true, allow
		return r
	}
	// servedWarm runs req once the pool has a warm jail for it and
	// checks that one served it.
	servedWarm := func(t *testing.T, req run.Request) *run.Execution {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for p.Stats().Warm == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no warm jail after 60s: %+v", p.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := p.Stats()
		x, err := e.eng.RunSync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		after := p.Stats()
		if after.NetworkRuns != before.NetworkRuns+1 || fork != (after.ForkedRuns > before.ForkedRuns) {
			t.Fatalf("not served warm with network (fork server %v): before %+v after %+v", fork, before, after)
		}
		return x
	}

	// The kinds start on their first execution (cold, or a miss).
	for _, r := range []run.Request{fetch("allowed.test"), secretRequest()} {
		if _, err := e.eng.RunSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("each execution has only its own allow list", func(t *testing.T) {
		x := servedWarm(t, fetch("allowed.test"))
		got := egresstest.Lines(x.Stdout)
		if x.Status != run.StatusCompleted || got["allowed.test"] != "hello allowed.test" || got["other.test"] != "URLError" {
			t.Fatalf("first: status %s stdout %q stderr %q", x.Status, x.Stdout, x.Stderr)
		}
		x = servedWarm(t, fetch("other.test"))
		got = egresstest.Lines(x.Stdout)
		if x.Status != run.StatusCompleted || got["allowed.test"] != "URLError" || got["other.test"] != "hello other.test" {
			t.Fatalf("second: status %s stdout %q stderr %q", x.Status, x.Stdout, x.Stderr)
		}
		refused := func(ev run.NetworkEvent) bool {
			return ev.Proto == "dns" && ev.Host == "allowed.test" && ev.Reason == egress.ReasonNotAllowed
		}
		if !slices.ContainsFunc(x.NetworkEvents, refused) {
			t.Errorf("no refused lookup of allowed.test in the second's record: %+v", x.NetworkEvents)
		}
	})

	t.Run("a secret is substituted", func(t *testing.T) {
		x := servedWarm(t, secretRequest())
		got := egresstest.Lines(x.Stdout)
		_, want := placeholderRan(t, x, got)
		if got["auth"] != want {
			t.Errorf("the host received %q, want %q (the value)", got["auth"], want)
		}
		injected := func(ev run.NetworkEvent) bool {
			return ev.Proto == "http" && ev.Secret == "GITHUB_TOKEN" && ev.Verdict == egress.VerdictAllow && ev.Path == "/auth"
		}
		if !slices.ContainsFunc(x.NetworkEvents, injected) {
			t.Errorf("no injection event in the record: %+v", x.NetworkEvents)
		}
	})

	t.Run("the server holds no device or namespace of an ended execution", func(t *testing.T) {
		// An ended execution's device goes after its answer.
		e.eng.teardowns.wait()
		// A warm execution waiting holds its device, made ahead (every
		// kind here has network); one being built holds its device, or a
		// namespace while it makes it, before it is counted. So, once
		// the pool is still, the server holds the test world's files and
		// one device per warm execution: a device of an ended execution
		// is one more, for good.
		var now, want []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			warm := p.Stats().Warm
			now = heldNetworkFiles()
			want = slices.Sorted(slices.Values(append(slices.Repeat([]string{"/dev/net/tun"}, warm), held...)))
			if slices.Equal(now, want) || time.Now().After(deadline) {
				break
			}
		}
		if !slices.Equal(now, want) {
			t.Errorf("the server holds %v, want %v (the test world's and one device per warm execution)", now, want)
		}
		// Closed, the pool leaves nothing but the test world's.
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
		if now := heldNetworkFiles(); !slices.Equal(now, held) {
			t.Errorf("the server holds %v once the pool is closed, before the executions %v", now, held)
		}
	})
}

// secretRequest sends the operator secret GITHUB_TOKEN to allowed.test
// (see pyUseSecret; without curl, which only the cold test needs).
func secretRequest() run.Request {
	r := py(pyUseSecret[:strings.Index(pyUseSecret, "curl = ")])
	r.Network, r.Secrets = true, []string{"GITHUB_TOKEN"}
	return r
}

// warmNetworkEngine is an engine whose runner is a warm pool over jails
// below the cgroup parent named parent (fork: with fork servers, every
// mount trusted), with the runner's driver, so that executions may be
// served warm; the operator allows allowed.test and
// other.test, terminates TLS, and holds the secret GITHUB_TOKEN
// (secretValue) for allowed.test.
func warmNetworkEngine(t *testing.T, w *egresstest.World, parent string, fork bool) (*env, *pool.Pool) {
	t.Helper()
	m, err := sandbox.New(sandbox.Config{CgroupParent: parent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the pool's
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	p := pool.New(m, pool.Config{BaseEnv: run.BaseEnv(), ForkServer: fork, TrustedMount: func(string) bool { return true }})
	t.Cleanup(func() { // after the engine's
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	e := start(t, t.TempDir(), nodeConfig{exec: Config{Run: secretsRun(t, w, "allowed.test", "other.test")},
		driver: run.RunnerDriver{}}, p)
	return e, p
}

// heldNetworkFiles lists, sorted, this process's descriptors of TUN
// devices and network namespaces.
func heldNetworkFiles() []string {
	var held []string
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && (target == "/dev/net/tun" || strings.HasPrefix(target, "net:[")) {
			held = append(held, target)
		}
	}
	slices.Sort(held)
	return held
}

// jailCgroupsUnder lists the cgroups (jails) left below the cgroup
// parent named parent, in every hierarchy.
func jailCgroupsUnder(parent string) []string {
	var left []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == parent {
			subs, _ := os.ReadDir(p)
			for _, s := range subs {
				if s.IsDir() {
					left = append(left, filepath.Join(p, s.Name()))
				}
			}
			return filepath.SkipDir
		}
		return nil
	})
	return left
}

// removeCgroupDirs removes the (empty) cgroup parent named parent.
func removeCgroupDirs(parent string) {
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == parent {
			_ = os.Remove(p)
			return filepath.SkipDir
		}
		return nil
	})
}
