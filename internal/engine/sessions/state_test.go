package sessions

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/snapshot"
)

// memVault keeps snapshots in memory, as the engine's snapshots service
// keeps them in the store: the same file, the same MAC.
type memVault struct {
	key snapshot.Key
	mu  sync.Mutex
	m   map[string][]byte
}

func newVault(t *testing.T) *memVault {
	key, err := snapshot.LoadKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &memVault{key: key, m: map[string][]byte{}}
}

type memPending struct {
	v   *memVault
	id  string
	buf bytes.Buffer
	w   *snapshot.Writer
}

func (v *memVault) Begin(_ context.Context, h snapshot.Header) (Pending, error) {
	p := &memPending{v: v, id: h.ID}
	w, err := snapshot.NewWriter(&p.buf, v.key, h, 1<<30)
	p.w = w
	return p, err
}

func (p *memPending) Writer() *snapshot.Writer { return p.w }

func (p *memPending) Commit() (int64, error) {
	n, err := p.w.Close()
	if err != nil {
		return 0, err
	}
	p.v.mu.Lock()
	p.v.m[p.id] = p.buf.Bytes()
	p.v.mu.Unlock()
	return n, nil
}

func (p *memPending) Abort(err error) error { return err }

func (v *memVault) Open(_ context.Context, id, owner string) (*snapshot.Snapshot, error) {
	v.mu.Lock()
	b, ok := v.m[id]
	v.mu.Unlock()
	if !ok {
		return nil, errors.New("no snapshot " + id)
	}
	return snapshot.Open(bytes.NewReader(b), int64(len(b)), v.key, owner, 1<<30)
}

func (v *memVault) Delete(_ context.Context, id string) error {
	v.mu.Lock()
	delete(v.m, id)
	v.mu.Unlock()
	return nil
}

func (v *memVault) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.m)
}

// open verifies snapshot id for owner, as the engine does before a
// restore.
func (v *memVault) open(t *testing.T, id, owner string) *snapshot.Snapshot {
	t.Helper()
	s, err := v.Open(context.Background(), id, owner)
	if err != nil {
		t.Fatalf("opening snapshot %s for %s: %v", id, owner, err)
	}
	return s
}

// TestSnapshotRestoreAndFork: a session's variables, functions and files
// come back in a session restored from its snapshot, whose cells count on
// from the parent's; a fork holds the same and then diverges from its
// parent: a change in one is not seen in the other.
func TestSnapshotRestoreAndFork(t *testing.T) {
	forEachKernel(t, func(t *testing.T, forked bool) {
		svc := newService(t, Config{}, forked)
		v := newVault(t)
		svc.deps.Vault = v
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
		svc := newService(t, Config{HibernateAfter: time.Second, ReapInterval: 50 * time.Millisecond}, forked)
		v := newVault(t)
		svc.deps.Vault = v
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
