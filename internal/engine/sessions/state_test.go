package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pool"
)

// TestSnapshotRestoreAndFork: a session's variables, functions and files
// come back in a session restored from its snapshot, whose cells count on
// from the parent's; a fork holds the same and then diverges from its
// parent: a change in one is not seen in the other.
func TestSnapshotRestoreAndFork(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		v := newVault(t)
		svc := newServiceWith(t, Config{}, forked, v)
		ctx := context.Background()
		a := newSession(t, svc, Request{})
		cell(t, svc, a, "x = 41\ndef f(y):\n    return x + y\nopen('note.txt', 'w').write('hi')")
		cell(t, svc, a, "import threading\nlock = threading.Lock()")

		saved, err := svc.Snapshot(ctx, live(t, svc, a))
		if err != nil {
			t.Fatal(err)
		}
		if saved.ID == "" || saved.Bytes <= 0 || saved.ExecutionCount != 2 || !slices.Contains(saved.Saved, "x") ||
			!slices.Contains(saved.Saved, "f") || len(saved.Skipped) != 1 || saved.Skipped[0].Name != "lock" {
			t.Fatalf("saved %+v", saved)
		}
		// The session goes on after its snapshot; the snapshot does not.
		cell(t, svc, a, "x = 100")

		restored, err := svc.Restore(ctx, Request{Caller: tester}, v.open(t, saved.ID, tester))
		if err != nil {
			t.Fatal(err)
		}
		if restored.FromSnapshot != saved.ID || restored.ExecutionCount != 2 || restored.MemoryLimit != 64<<20 {
			t.Errorf("restored %+v", restored)
		}
		r := cell(t, svc, restored.ID, "f(1), open('note.txt').read(), 'lock' in globals()")
		if result(r) != "(42, 'hi', False)" || r.ExecutionCount != 3 {
			t.Fatalf("restored session: %q (count %d, stderr %s)", result(r), r.ExecutionCount, r.Stderr)
		}
		if _, err := svc.Restore(ctx, Request{Caller: "someone-else"}, v.open(t, saved.ID, tester)); err == nil {
			t.Fatal("a snapshot was restored for a caller that does not own it")
		}

		child, err := svc.Fork(ctx, live(t, svc, a))
		if err != nil {
			t.Fatal(err)
		}
		if child.ForkedFrom != a || child.ExecutionCount != 3 {
			t.Errorf("forked %+v", child)
		}
		if r := cell(t, svc, child.ID, "f(1), open('note.txt').read()"); result(r) != "(101, 'hi')" {
			t.Fatalf("the fork: %q (stderr %s)", result(r), r.Stderr)
		}
		cell(t, svc, child.ID, "x = 0\nopen('note.txt', 'w').write('child')")
		cell(t, svc, a, "y = 'parent only'")
		if r := cell(t, svc, a, "f(1), open('note.txt').read(), 'y' in globals()"); result(r) != "(101, 'hi', True)" {
			t.Errorf("the parent after the fork changed: %q", result(r))
		}
		if r := cell(t, svc, child.ID, "f(1), open('note.txt').read(), 'y' in globals()"); result(r) != "(1, 'child', False)" {
			t.Errorf("the fork after the parent changed: %q", result(r))
		}
	})
}

// TestSnapshotWithoutVault: a server without a place for snapshots refuses
// them and leaves the session as it was.
func TestSnapshotWithoutVault(t *testing.T) {
	svc := newService(t, Config{}, true)
	a := newSession(t, svc, Request{})
	if _, err := svc.Snapshot(context.Background(), live(t, svc, a)); !errors.Is(err, ErrNoSnapshots) {
		t.Fatalf("without a vault: %v, want ErrNoSnapshots", err)
	}
	// The session is unharmed.
	if r := cell(t, svc, a, "1 + 1"); result(r) != "2" {
		t.Fatalf("after the refused snapshot: %q", result(r))
	}
}

// TestHibernation: a session idle for HibernateAfter gives up its kernel
// and its memory, says it is hibernated, and its next cell finds its
// variables and files, says it resumed, and leaves no snapshot behind;
// the cell after is an ordinary one.
func TestHibernation(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		v := newVault(t)
		svc := newServiceWith(t, Config{HibernateAfter: time.Second, ReapInterval: 50 * time.Millisecond}, forked, v)
		id := newSession(t, svc, Request{})
		cell(t, svc, id, "x = list(range(5))\nopen('f.txt', 'w').write('kept')")
		deadline := time.Now().Add(10 * time.Second)
		for live(t, svc, id).Info().State != Hibernated {
			if time.Now().After(deadline) {
				t.Fatalf("not hibernated: %+v", live(t, svc, id).Info())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st := svc.Stats(); st.Live != 1 || st.MemoryBytes != 0 || v.count() != 1 {
			t.Fatalf("hibernated: %+v, %d snapshots stored", st, v.count())
		}
		r := cell(t, svc, id, "sum(x), open('f.txt').read()")
		if result(r) != "(10, 'kept')" || !r.Resumed || r.ExecutionCount != 2 {
			t.Fatalf("the first cell after hibernation: %q resumed=%v count=%d (stderr %s)", result(r), r.Resumed, r.ExecutionCount, r.Stderr)
		}
		if v.count() != 0 {
			t.Errorf("the hibernation snapshot outlived the resume")
		}
		if r := cell(t, svc, id, "len(x)"); result(r) != "5" || r.Resumed {
			t.Errorf("the next cell: %q resumed=%v", result(r), r.Resumed)
		}
	})
}

// TestClientGoneDuringItsSnapshot: a client that goes away while its
// session's state is being saved (a snapshot, a fork) does not interrupt
// the pickling (a KeyboardInterrupt in the session, and a kill if it
// does not end within the grace): the snapshot is saved all the same,
// and the session keeps its variables.
func TestClientGoneDuringItsSnapshot(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{InterruptGrace: 300 * time.Millisecond}, false, v)
	id := newSession(t, svc, Request{Caller: tester})
	cell(t, svc, id, "import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(1)\n        return (str, ('slow',))\nx = Slow()\ny = 'kept'")
	for _, op := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"snapshot", func(ctx context.Context) error { _, err := svc.Snapshot(ctx, live(t, svc, id)); return err }},
		{"fork", func(ctx context.Context) error { _, err := svc.Fork(ctx, live(t, svc, id)); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := op.run(ctx)
		cancel()
		t.Logf("the %s whose client went away: %v", op.name, err)
		time.Sleep(time.Second) // past the interrupt's grace
		if r := cell(t, svc, id, "y"); result(r) != "'kept'" {
			t.Fatalf("the session after a %s whose client went away: %q (stderr %s)", op.name, result(r), r.Stderr)
		}
	}
	if n := len(v.ids()); n != 1 {
		t.Errorf("%d snapshots stored, want the one whose client went away", n)
	}
}

// TestSnapshotWhoseInterpreterEndsEndsTheSession: code whose pickling
// hook ends the interpreter makes its snapshot fail as the session's end
// (410 through the API), not a server error, and the session is gone.
func TestSnapshotWhoseInterpreterEndsEndsTheSession(t *testing.T) {
	svc := newServiceWith(t, Config{InterruptGrace: 200 * time.Millisecond}, false, newVault(t))
	id := newSession(t, svc, Request{Caller: "alice"})
	cell(t, svc, id, "import os\nclass Boom:\n    def __reduce__(self):\n        os._exit(3)\nb = Boom()")
	_, err := svc.Snapshot(context.Background(), live(t, svc, id))
	if !errors.Is(err, ErrEnded) {
		t.Fatalf("snapshot of a session whose pickling exits: %v, want ErrEnded", err)
	}
	if _, err := svc.Lookup(id); !errors.Is(err, ErrNotFound) {
		t.Errorf("the session after its interpreter ended in a snapshot: %v, want not found", err)
	}
}

// TestRestoredStateCountsAgainstTheMemoryLimit: the memory a session's
// state is loaded into is its own jail's: a restore under a limit the
// state does not fit fails, and a restored or forked session's memory
// holds its state (40 MiB of out-of-band buffer, as numpy's arrays pickle).
func TestRestoredStateCountsAgainstTheMemoryLimit(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{}, true, v)
	ctx := context.Background()
	a := newSession(t, svc, Request{})
	cell(t, svc, a, "import hashlib, pickle, os\nclass Blob:\n    def __init__(self, b):\n        self.b = b\n"+
		"    def __reduce_ex__(self, protocol):\n        return Blob, (pickle.PickleBuffer(self.b),)\n"+
		"blob = Blob(bytearray(os.urandom(1 << 20)) * 40)")
	digest := "hashlib.sha256(memoryview(blob.b)).hexdigest()"
	want := result(cell(t, svc, a, digest))
	saved, err := svc.Snapshot(ctx, live(t, svc, a))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Restore(ctx, Request{Caller: tester, MemoryBytes: 32 << 20}, v.open(t, saved.ID, tester)); err == nil {
		t.Fatal("a 40 MiB state was restored into a session of 32 MiB")
	}
	restored, err := svc.Restore(ctx, Request{Caller: tester}, v.open(t, saved.ID, tester))
	if err != nil {
		t.Fatal(err)
	}
	child, err := svc.Fork(ctx, live(t, svc, a))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{restored.ID, child.ID} {
		if got := result(cell(t, svc, id, digest)); got != want {
			t.Errorf("session %s: %s, want %s", id, got, want)
		}
		if info := live(t, svc, id).Info(); info.MemoryBytes < 40<<20 || info.MemoryLimit != 64<<20 {
			t.Errorf("session %s: %d bytes in use of %d, want its 40 MiB state in them", id, info.MemoryBytes, info.MemoryLimit)
		}
	}
}

// TestForkWhoseChildEndsLoading: a fork whose new interpreter ends while
// it loads the parent's state (an object whose unpickling exits, aborts
// or takes more than the session's memory) is refused with ErrForkEnded
// saying how it ended, not as the server's error; the parent keeps its
// interpreter and its variables, and neither the child session nor its
// jail is left.
func TestForkWhoseChildEndsLoading(t *testing.T) {
	svc := newService(t, Config{}, true)
	jails := svc.deps.Forker.(*pool.Pool)
	all := func(string) bool { return true }
	for _, tc := range []struct{ name, unpickle, want string }{
		{"exit", "os._exit, (3,)", ": exit code 3;"},
		{"abort", "os.abort, ()", ": killed by signal 6 (aborted);"},
		{"oom", "operator.mul, (b'x', 256 << 20)", ": out of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newSession(t, svc, Request{})
			cell(t, svc, id, "import os, operator\nclass Bomb:\n    def __reduce__(self):\n        return "+tc.unpickle+
				"\nb = Bomb()\nx = 41")
			_, err := svc.Fork(context.Background(), live(t, svc, id))
			if !errors.Is(err, ErrForkEnded) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fork of a state whose loading ends the interpreter: %v, want ErrForkEnded with %q", err, tc.want)
			}
			if r := cell(t, svc, id, "x + 1, type(b).__name__"); result(r) != "(42, 'Bomb')" {
				t.Errorf("the parent after the failed fork: %q (%s %s)", result(r), r.Reason, r.Error)
			}
			if n := len(svc.List(all)); n != 1 {
				t.Errorf("%d sessions after the failed fork, want the parent only", n)
			}
			if st := jails.Stats(); st.Sessions != 1 {
				t.Errorf("%d session jails after the failed fork, want the parent's only", st.Sessions)
			}
			svc.Delete(live(t, svc, id))
		})
	}
}

// TestForkWhoseChildEndsMidWrite: a fork whose new interpreter ends while
// the parent still writes its state into it is refused with ErrForkEnded
// saying how it ended, not as the server's error; the parent keeps its
// interpreter and its variables, and neither the child session nor its
// jail is left. The parent's views of one buffer are pickled as so many
// buffers: the child, which reads them all before it unpickles anything,
// runs out of memory near the end of the state. One more view at each try
// moves that point away from the end, across the last pipeful (which the
// parent has written whole when the child ends within it).
func TestForkWhoseChildEndsMidWrite(t *testing.T) {
	svc := newService(t, Config{}, true)
	jails := svc.deps.Forker.(*pool.Pool)
	id := newSession(t, svc, Request{MemoryBytes: 64 << 20})
	// 32 MiB and 256 KiB held once by the parent; the child reads the
	// 256 KiB once more per view, and passes 64 MiB about 2.5 MiB before
	// the end of the state at the first try.
	views := int(64<<20-live(t, svc, id).Info().MemoryBytes-33<<20)>>18 - 10
	cell(t, svc, id, fmt.Sprintf("import pickle\nbig = pickle.PickleBuffer(bytearray(32 << 20))\n"+
		"small = bytearray(1 << 18)\nviews = [pickle.PickleBuffer(small) for _ in range(%d)]\nx = 41", views))
	for try := range 16 {
		_, err := svc.Fork(context.Background(), live(t, svc, id))
		if !errors.Is(err, ErrForkEnded) || !strings.Contains(err.Error(), ": out of memory") {
			t.Fatalf("fork of a state whose child runs out of memory as it is written (%d views): %v, want ErrForkEnded, out of memory",
				views+try, err)
		}
		cell(t, svc, id, "views.append(pickle.PickleBuffer(small))")
	}
	if r, want := cell(t, svc, id, "x + 1, len(views), big.raw().nbytes"), fmt.Sprintf("(42, %d, %d)", views+16, 32<<20); result(r) != want {
		t.Errorf("the parent after the failed forks: %q (%s %s), want %s", result(r), r.Reason, r.Error, want)
	}
	if n := len(svc.List(func(string) bool { return true })); n != 1 {
		t.Errorf("%d sessions after the failed forks, want the parent only", n)
	}
	if st := jails.Stats(); st.Sessions != 1 {
		t.Errorf("%d session jails after the failed forks, want the parent's only", st.Sessions)
	}
}
