package sessions

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/snapshot"
)

// memVault keeps snapshots in memory, as the engine's snapshots service
// keeps them in the store: the same file, the same MAC.
// Its hooks make it fail as a store may: failBegin and failOpen are
// returned by Begin and Open; holdBegin, when set, is waited on by the
// next Begin, holdCommit by every Commit. begun counts the snapshots begun.
type memVault struct {
	key snapshot.Key
	mu  sync.Mutex
	m   map[string][]byte

	failBegin, failOpen   error
	holdBegin, holdCommit chan struct{}
	begun                 int
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
	v.mu.Lock()
	v.begun++
	fail, hold := v.failBegin, v.holdBegin
	v.holdBegin = nil // the first only
	v.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if fail != nil {
		return nil, fail
	}
	p := &memPending{v: v, id: h.ID}
	w, err := snapshot.NewWriter(&p.buf, v.key, h, 1<<30)
	p.w = w
	return p, err
}

func (p *memPending) Writer() *snapshot.Writer { return p.w }

func (p *memPending) Commit() (int64, error) {
	p.v.mu.Lock()
	hold := p.v.holdCommit
	p.v.mu.Unlock()
	if hold != nil {
		<-hold
	}
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
	fail := v.failOpen
	v.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotGone, id)
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

// set changes the vault's hooks.
func (v *memVault) set(f func(v *memVault)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

// attempts is how many snapshots were begun.
func (v *memVault) attempts() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.begun
}

// ids lists the stored snapshots.
func (v *memVault) ids() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Collect(maps.Keys(v.m))
}
