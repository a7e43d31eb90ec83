package snapshots

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
)

func newService(t *testing.T, cfg Config) *Service {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	st, err := store.Open(ctx, emb.Conn(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Key, err = snapshot.LoadKey(dir); err != nil {
		t.Fatal(err)
	}
	cfg.SpoolDir = dir
	v, err := New(cfg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// save stores a snapshot of kind for owner holding state.
func save(v *Service, owner, kind string, state []byte) (string, error) {
	h := snapshot.Header{ID: snapshot.NewID(), Owner: owner, Kind: kind, Created: time.Now(), StateBytes: int64(len(state))}
	p, err := v.Begin(context.Background(), h)
	if err != nil {
		return "", err
	}
	if _, err := p.Writer().State().Write(state); err != nil {
		return "", p.Abort(err)
	}
	_, err = p.Commit()
	return h.ID, err
}

// TestQuotaAndCap: a key's own snapshots stop at its quota of snapshots
// and of bytes (429, naming it), a snapshot over the cap is refused
// (413), the server's own snapshots of a key's sessions count against its
// quota, and nothing refused is stored.
func TestQuotaAndCap(t *testing.T) {
	v := newService(t, Config{MaxBytes: 1 << 20, QuotaBytes: 1 << 20, QuotaCount: 2})
	ctx := context.Background()
	state := bytes.Repeat([]byte("s"), 600<<10)
	first, err := save(v, "a", snapshot.KindUser, state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := save(v, "a", snapshot.KindUser, state); !errors.Is(err, ErrQuota) {
		t.Errorf("a second snapshot over the key's bytes: %v, want ErrQuota", err)
	}
	if _, err := save(v, "b", snapshot.KindUser, bytes.Repeat([]byte("s"), 2<<20)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a snapshot over the cap: %v, want ErrTooLarge", err)
	}
	if _, err := save(v, "a", snapshot.KindHibernation, state); !errors.Is(err, ErrQuota) {
		t.Errorf("a hibernation of a's session over a's bytes: %v, want ErrQuota", err)
	}
	hib, err := save(v, "a", snapshot.KindHibernation, []byte("small"))
	if err != nil {
		t.Fatalf("a small hibernation of a's session: %v", err)
	}
	if _, err := save(v, "a", snapshot.KindUser, []byte("small")); !errors.Is(err, ErrQuota) {
		t.Errorf("a snapshot while a hibernation takes a's second place: %v, want ErrQuota", err)
	}
	if err := v.Delete(ctx, hib); err != nil {
		t.Fatal(err)
	}
	if _, err := save(v, "a", snapshot.KindUser, []byte("small")); err != nil {
		t.Errorf("a small second snapshot within the quota: %v", err)
	}
	if _, err := save(v, "a", snapshot.KindUser, []byte("small")); !errors.Is(err, ErrQuota) {
		t.Errorf("a third snapshot: %v, want ErrQuota", err)
	}
	mine, err := v.List(ctx, snapshot.KindUser, func(o string) bool { return o == "a" })
	if err != nil || len(mine) != 2 || mine[0].ID != first || mine[0].Bytes < 600<<10 {
		t.Fatalf("a's snapshots: %+v, %v", mine, err)
	}
	all, err := v.List(ctx, snapshot.KindUser, func(string) bool { return true })
	if err != nil || len(all) != 2 {
		t.Errorf("every key's snapshots: %d, %v; the refused ones were stored", len(all), err)
	}
	s, err := v.Open(ctx, first, "a")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := v.Open(ctx, first, "b"); !errors.Is(err, ErrIntegrity) {
		t.Errorf("a's snapshot opened for b: %v, want ErrIntegrity", err)
	}
}

// countingStore counts the snapshots read out of its store.
type countingStore struct {
	Store
	gets *atomic.Int32
}

func (c countingStore) GetSnapshot(ctx context.Context, id string) (io.ReadCloser, store.SnapshotInfo, error) {
	c.gets.Add(1)
	return c.Store.GetSnapshot(ctx, id)
}

// TestOpenChecksBeforeSpooling: a snapshot the store says is over the cap
// is refused without a byte of it read; at most Spools snapshots are read
// at once, a further Open waits for a turn and gives up with its context;
// a refused Open gives its turn back.
func TestOpenChecksBeforeSpooling(t *testing.T) {
	v := newService(t, Config{MaxBytes: 1 << 20, Spools: 1})
	ctx := context.Background()
	big, err := save(v, "a", snapshot.KindUser, bytes.Repeat([]byte("s"), 600<<10))
	if err != nil {
		t.Fatal(err)
	}
	small, err := save(v, "a", snapshot.KindUser, []byte("small"))
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	v.st = countingStore{v.st, &gets}
	v.cfg.MaxBytes = 512 << 10 // the cap lowered since big was saved
	if _, err := v.Open(ctx, big, "a"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a snapshot over the cap: %v, want ErrTooLarge", err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("a snapshot over the cap was read %d times before it was refused", n)
	}
	if _, err := v.Open(ctx, small, "b"); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("a's snapshot for b: %v, want ErrIntegrity", err)
	}
	held, err := v.Open(ctx, small, "a")
	if err != nil {
		t.Fatalf("after a refused Open: %v (its turn was not given back)", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := v.Open(short, small, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second Open while the only turn is held: %v, want it to wait and give up", err)
	}
	held.Close()
	again, err := v.Open(ctx, small, "a")
	if err != nil {
		t.Fatalf("once the turn is given back: %v", err)
	}
	again.Close()
	if n := gets.Load(); n != 3 {
		t.Errorf("%d snapshots read, want 3 (the waiting Open read nothing)", n)
	}
}
