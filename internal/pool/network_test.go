package pool

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// testEgress stands in for the engine's egress: it keeps the TUN device a
// jail's egress link hands it, or refuses it with fail; like the real
// one it serves one device in its life and refuses a second. onServe,
// when set, runs once a device is taken.
type testEgress struct {
	fail    error
	onServe func()
	mu      sync.Mutex
	tun     *os.File
}

func (e *testEgress) Serve(tun *os.File) error {
	if e.fail != nil {
		return e.fail
	}
	e.mu.Lock()
	if e.tun != nil {
		e.mu.Unlock()
		return errors.New("egress already serving")
	}
	e.tun = tun
	e.mu.Unlock()
	if e.onServe != nil {
		e.onServe()
	}
	return nil
}

// served reports whether a TUN device was handed to e.
func (e *testEgress) served() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tun != nil
}

// close closes the device, as the engine closes an execution's egress
// once its payload is gone.
func (e *testEgress) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tun != nil {
		e.tun.Close()
	}
}

// netSpec is spec(code) with network, its route out served by eg.
func netSpec(t *testing.T, code string, eg *testEgress) sandbox.Spec {
	t.Helper()
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun for the jails' egress devices: %v", err)
	}
	t.Cleanup(eg.close)
	s := spec(code)
	s.Network, s.Egress = true, eg
	return s
}

// TestNetworkExecutionsTakeWarmJails: an execution with network takes a
// warm jail or one forked from a fork server, whose network namespace
// holds its loopback and, attached at hand-off, the egress device of this
// execution alone; the next takes another with another namespace.
func TestNetworkExecutionsTakeWarmJails(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		const code = "import os, socket\nprint([n for _, n in socket.if_nameindex()], os.readlink('/proc/self/ns/net'))\n"
		warmUp(t, p, netSpec(t, code, &testEgress{}))
		var namespaces []string
		for i := range 2 {
			waitReady(t, p)
			eg := &testEgress{}
			before := p.Stats()
			res := run(t, p, netSpec(t, code, eg))
			after := p.Stats()
			if after.Hits != before.Hits+1 || after.NetworkRuns != before.NetworkRuns+1 {
				t.Fatalf("run %d not served warm: before %+v after %+v", i, before, after)
			}
			served(t, p, fork, before.ForkedRuns)
			out := strings.TrimSpace(string(res.Stdout))
			ifaces, ns, _ := strings.Cut(out, " net:")
			if res.Status != sandbox.StatusOK || ifaces != "['lo', 'eth0']" || !eg.served() {
				t.Fatalf("run %d: status %s stdout %q stderr %s; egress served: %v", i, res.Status, res.Stdout, res.Stderr, eg.served())
			}
			namespaces = append(namespaces, ns)
		}
		if namespaces[0] == namespaces[1] {
			t.Fatalf("two network executions shared the network namespace %s", namespaces[0])
		}
	})
}

// TestNetworkAttachFailureFailsClosed: when the egress cannot be attached
// to the warm jail, none of the execution's code runs there; the jail made
// for it alone cannot attach it either, and the execution ends a setup
// error saying why.
func TestNetworkAttachFailureFailsClosed(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		const code = "print('ran')\n"
		warmUp(t, p, netSpec(t, code, &testEgress{}))
		waitReady(t, p)
		before := p.Stats()
		res := run(t, p, netSpec(t, code, &testEgress{fail: errors.New("no route out today")}))
		after := p.Stats()
		if res.Status != sandbox.StatusSetupError || !strings.Contains(res.Reason, "no route out today") || len(res.Stdout) > 0 {
			t.Fatalf("status %s (%s) stdout %q: want a setup error before the code ran", res.Status, res.Reason, res.Stdout)
		}
		if after.NetworkRuns != before.NetworkRuns || after.Misses != before.Misses+1 {
			t.Fatalf("counted as served warm: before %+v after %+v", before, after)
		}
	})
}

// TestNetworkHandOffAfterAttachFailsClosed: a warm execution that dies
// after its egress was attached and before its code ran cannot be retried
// cold with the same egress (it serves one device): the execution ends a
// setup error saying what happened, nothing of it ran, and the dead warm
// jail is not counted as served.
func TestNetworkHandOffAfterAttachFailsClosed(t *testing.T) {
	forEachMode(t, func(t *testing.T, fork bool) {
		p := newPool(t, Config{ForkServer: fork})
		const code = "print('ran')\n"
		warmUp(t, p, netSpec(t, code, &testEgress{}))
		waitReady(t, p)
		// Whichever ready jail the execution takes dies right after its
		// egress is attached.
		p.mu.Lock()
		var ready []*warmJail
		for _, k := range p.kinds {
			ready = append(ready, k.ready...)
		}
		p.mu.Unlock()
		eg := &testEgress{onServe: func() {
			for _, w := range ready {
				w.proc.Kill()
				w.proc.Wait()
			}
		}}
		before := p.Stats()
		res := run(t, p, netSpec(t, code, eg))
		after := p.Stats()
		if res.Status != sandbox.StatusSetupError || !strings.Contains(res.Reason, "before its code ran") || len(res.Stdout) > 0 || !eg.served() {
			t.Fatalf("status %s (%s) stdout %q served %v: want a setup error before the code ran", res.Status, res.Reason, res.Stdout, eg.served())
		}
		if after.NetworkRuns != before.NetworkRuns || after.Hits != before.Hits || after.Misses != before.Misses+1 {
			t.Fatalf("counted as served warm: before %+v after %+v", before, after)
		}
		// The pool goes on serving network executions warm.
		waitReady(t, p)
		if res := run(t, p, netSpec(t, code, &testEgress{})); res.Status != sandbox.StatusOK || string(res.Stdout) != "ran\n" {
			t.Fatalf("next run: status %s (%s) stdout %q", res.Status, res.Reason, res.Stdout)
		}
	})
}

// TestNetworkKindsBoundedTogether: kinds with network differ by things
// of the request (here its collect globs), so one client could make many;
// NetworkMax bounds them all together: at most NetworkMax such kinds, an
// execution of a further one runs cold (and is served), so never more
// than NetworkMax² warm jails with network are held.
func TestNetworkKindsBoundedTogether(t *testing.T) {
	p := newPool(t, Config{NetworkMax: 2})
	const code = "print('ran')\n"
	for i := range 4 {
		s := netSpec(t, code, &testEgress{})
		s.Collect = &sandbox.Collect{Globs: []string{fmt.Sprintf("out%d/*", i)}}
		before := p.Stats()
		res := run(t, p, s)
		after := p.Stats()
		if res.Status != sandbox.StatusOK || string(res.Stdout) != "ran\n" {
			t.Fatalf("run %d: status %s (%s) stdout %q", i, res.Status, res.Reason, res.Stdout)
		}
		if i >= 2 && after.Cold != before.Cold+1 {
			t.Fatalf("run %d of a third network kind did not run cold: before %+v after %+v", i, before, after)
		}
	}
	waitReady(t, p)
	p.mu.Lock()
	kinds, warm := 0, 0
	for _, k := range p.kinds {
		if k.spec.Network {
			kinds++
			warm += len(k.ready) + k.building
		}
	}
	p.mu.Unlock()
	if kinds != 2 || warm > 4 {
		t.Fatalf("%d network kinds holding %d warm jails: want 2 kinds, at most 4 jails", kinds, warm)
	}
}

// TestNetworkForkServersApart: a kind with network forks from a fork
// server of its own without taking a place of MaxForkServers: on a pool
// whose one place the plain kind holds, both kinds still fork, and the
// plain kind keeps its server.
func TestNetworkForkServersApart(t *testing.T) {
	p := newPool(t, Config{ForkServer: true, MaxForkServers: 1})
	plain := spec("print('plain')\n")
	warmUp(t, p, plain)
	before := p.Stats()
	if res := run(t, p, plain); res.Status != sandbox.StatusOK {
		t.Fatalf("plain: %s %s", res.Status, res.Stderr)
	}
	served(t, p, true, before.ForkedRuns)
	const code = "print('net')\n"
	warmUp(t, p, netSpec(t, code, &testEgress{}))
	bothReady := func() { // one of each kind: the plain kind alone may hold two
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ready := map[bool]int{} // by network
			p.mu.Lock()
			for _, k := range p.kinds {
				ready[k.spec.Network] += len(k.ready)
			}
			p.mu.Unlock()
			if ready[false] > 0 && ready[true] > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not both kinds warm after 60s: %+v", p.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	bothReady()
	for i := range 2 {
		before = p.Stats()
		eg := &testEgress{}
		if res := run(t, p, netSpec(t, code, eg)); res.Status != sandbox.StatusOK || !eg.served() {
			t.Fatalf("network run %d: %s %s; egress served: %v", i, res.Status, res.Stderr, eg.served())
		}
		if p.Stats().NetworkRuns != before.NetworkRuns+1 {
			t.Fatalf("network run %d not served warm: %+v", i, p.Stats())
		}
		served(t, p, true, before.ForkedRuns)
		bothReady()
		before = p.Stats()
		if res := run(t, p, plain); res.Status != sandbox.StatusOK {
			t.Fatalf("plain run %d: %s %s", i, res.Status, res.Stderr)
		}
		served(t, p, true, before.ForkedRuns)
		bothReady()
	}
	if n := len(forkServers()); n != 2 {
		t.Errorf("%d fork servers run, want 2 (the plain kind's and the network kind's)", n)
	}
}
