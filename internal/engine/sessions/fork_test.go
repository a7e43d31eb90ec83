package sessions

import (
	"context"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/pool"
)

// TestForkedSessionHasThePreloads: a forked session's first cell finds
// what its fork server preloaded already imported (as pandas is for a
// server's base environment); a cold session's does not.
func TestForkedSessionHasThePreloads(t *testing.T) {
	const probe = "import sys\n'xml.dom.minidom' in sys.modules"
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked, "xml.dom.minidom")
		id := newSession(t, svc, Request{})
		want := map[bool]string{true: "True", false: "False"}[forked]
		if r := cell(t, svc, id, probe); result(r) != want {
			t.Fatalf("preloaded module in the first cell: %q, want %s (stderr %s)", result(r), want, r.Stderr)
		}
		// A restart forks again: the preloads are back, the state is not.
		cell(t, svc, id, "x = 1")
		if _, err := svc.Restart(context.Background(), live(t, svc, id)); err != nil {
			t.Fatal(err)
		}
		if r := cell(t, svc, id, probe+", 'x' in globals()"); result(r) != "("+want+", False)" {
			t.Fatalf("after the restart: %q", result(r))
		}
	})
}

// TestSessionsDoNotSeeEachOther: a session finds neither the files nor the
// processes of another one.
func TestSessionsDoNotSeeEachOther(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		a := newSession(t, svc, Request{})
		b := newSession(t, svc, Request{})
		r := cell(t, svc, a, "import subprocess, sys\n"+
			"open('secret.txt', 'w').write('a')\nopen('/tmp/secret.txt', 'w').write('a')\nopen('/dev/shm/secret', 'w').write('a')\n"+
			"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # session-a-sleeper'])\np.pid")
		if r.Status != run.StatusCompleted || result(r) == "" {
			t.Fatalf("session a: %s %q %s", r.Status, result(r), r.Stderr)
		}
		r = cell(t, svc, b, `import os
seen = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            seen.append(open('/proc/%s/cmdline' % pid, 'rb').read().replace(b'\0', b' ').decode())
        except OSError:
            pass
files = [p for p in ('secret.txt', '/tmp/secret.txt', '/dev/shm/secret') if os.path.exists(p)]
(any('session-a-sleeper' in c for c in seen), files, len(seen) > 0)`)
		if got := result(r); got != "(False, [], True)" {
			t.Fatalf("session b sees session a: %s (stderr %s)", got, r.Stderr)
		}
		// While a, which sees its own.
		r = cell(t, svc, a, "import os\n(os.path.exists('secret.txt'), any('session-a-sleeper' in open('/proc/%s/cmdline' % p).read() for p in os.listdir('/proc') if p.isdigit()))")
		if got := result(r); got != "(True, True)" {
			t.Fatalf("session a sees %s of its own", got)
		}
	})
}

// TestSessionOutOfMemory: a cell that takes more than the session's
// memory ends the session with reason oom.
func TestSessionOutOfMemory(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		id := newSession(t, svc, Request{MemoryBytes: 48 << 20})
		cell(t, svc, id, "x = 1")
		r := cell(t, svc, id, "b = bytearray(b'x') * (400 << 20)")
		if r.Status != run.StatusFailed || r.Reason != run.ReasonOOM || !r.SessionEnded {
			t.Fatalf("got status=%s reason=%s ended=%v error=%s", r.Status, r.Reason, r.SessionEnded, r.Error)
		}
		if _, err := svc.Lookup(id); err == nil {
			t.Fatal("the session outlived its out-of-memory kill")
		}
	})
}

// TestForkedSessionsInThePoolsAccounting: the pool counts forked session
// kernels and their memory while they live, and their fork server.
func TestForkedSessionsInThePoolsAccounting(t *testing.T) {
	svc := newService(t, Config{}, true)
	p := svc.deps.Forker.(*pool.Pool)
	ids := []string{newSession(t, svc, Request{}), newSession(t, svc, Request{})}
	cell(t, svc, ids[0], "data = b'y' * (8 << 20)")
	st := p.Stats()
	if st.Sessions != 2 || st.Templates != 1 || st.SessionMemory < 8<<20 || st.TemplateMemory <= 0 {
		t.Fatalf("with two sessions, one holding 8 MiB: %+v", st)
	}
	if es := svc.Stats(); es.MemoryBytes < 8<<20 {
		t.Errorf("the sessions count %d bytes of sessions, the pool %d", es.MemoryBytes, st.SessionMemory)
	}
	for i, id := range ids {
		svc.Delete(live(t, svc, id))
		// The fork server stays for the next session (until the pool's
		// idle time).
		if st = p.Stats(); st.Sessions != len(ids)-1-i || st.Templates != 1 {
			t.Fatalf("after deleting %d of 2 sessions: %+v", i+1, st)
		}
	}
}
