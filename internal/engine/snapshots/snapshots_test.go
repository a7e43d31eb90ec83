package snapshots

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
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
// (413), the server's own snapshots of a key's sessions have a quota of
// their own, which neither takes the other's room, and nothing refused is
// stored.
func TestQuotaAndCap(t *testing.T) {
	v := newService(t, Config{MaxBytes: 1 << 20, QuotaBytes: 1 << 20, QuotaCount: 2, HibernationCount: 1})
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
	if _, err := save(v, "a", snapshot.KindHibernation, state); err != nil {
		t.Errorf("a hibernation of a's session while a's own snapshots are near their quota: %v", err)
	}
	_, err = save(v, "a", snapshot.KindHibernation, []byte("small"))
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "hibernated sessions") {
		t.Errorf("a second hibernation over a's quota of one: %v, want ErrQuota naming the hibernated sessions", err)
	}
	if _, err := save(v, "a", snapshot.KindUser, []byte("small")); err != nil {
		t.Errorf("a small second snapshot within the quota, a hibernation stored: %v", err)
	}
	_, err = save(v, "a", snapshot.KindUser, []byte("small"))
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "holds 2 snapshots") && !strings.Contains(err.Error(), "hold 2 snapshots") {
		t.Errorf("a third snapshot: %v, want ErrQuota counting the 2 the key can list", err)
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
// is refused without a byte of it read; a key has at most ReadsPerOwner
// snapshots open at once, a further Open of it waits for a turn and gives
// up with its context, while another key's Open goes ahead; the node's
// spool holds at most SpoolBytes at once (an Open past it waits, then
// 503); a refused Open gives its turn back.
func TestOpenChecksBeforeSpooling(t *testing.T) {
	v := newService(t, Config{MaxBytes: 1 << 20, Spools: 1, ReadsPerOwner: 1, SpoolBytes: 1 << 20})
	ctx := context.Background()
	big, err := save(v, "a", snapshot.KindUser, bytes.Repeat([]byte("s"), 600<<10))
	if err != nil {
		t.Fatal(err)
	}
	small, err := save(v, "a", snapshot.KindUser, []byte("small"))
	if err != nil {
		t.Fatal(err)
	}
	bs, err := save(v, "b", snapshot.KindUser, []byte("b's"))
	if err != nil {
		t.Fatal(err)
	}
	bbig, err := save(v, "b", snapshot.KindUser, bytes.Repeat([]byte("s"), 600<<10))
	if err != nil {
		t.Fatal(err)
	}
	held, err := v.Open(ctx, big, "a")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancelWait := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelWait()
	if _, err := v.Open(wait, bbig, "b"); !errors.Is(err, ErrNoRoom) {
		t.Errorf("b's big snapshot while a's fills the spool's budget: %v, want it to wait for room, then ErrNoRoom", err)
	}
	// a's open snapshot (being loaded) holds neither the node's only
	// turn nor b's
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	bopen, err := v.Open(bctx, bs, "b")
	if err != nil {
		t.Fatalf("b's snapshot while a's is open: %v", err)
	}
	bopen.Close()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := v.Open(short, small, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second Open of a while its only turn is held: %v, want it to wait and give up", err)
	}
	held.Close()
	var gets atomic.Int32
	v.st = countingStore{v.st, &gets}
	v.cfg.MaxBytes = 512 << 10 // the cap lowered since big was saved
	if _, err := v.Open(ctx, big, "a"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a snapshot over the cap: %v, want ErrTooLarge", err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("a snapshot over the cap was read %d times before it was refused", n)
	}
	if _, err := v.Open(ctx, bs, "a"); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("b's snapshot for a: %v, want ErrIntegrity", err)
	}
	again, err := v.Open(ctx, small, "a")
	if err != nil {
		t.Fatalf("after a refused Open: %v (a's turn or the spool's bytes were not given back)", err)
	}
	again.Close()
	if n := gets.Load(); n != 2 {
		t.Errorf("%d snapshots read, want 2 (the one over the cap read nothing)", n)
	}
}

// TestSpoolShares: one key holds at most its share of the spool's bytes
// (a quarter, at least one snapshot's cap): its next Open waits for room,
// and goes ahead once its first closes, while another key's Open goes
// ahead at once; so keys that keep stalling loads open cannot take the
// whole spool from the others.
func TestSpoolShares(t *testing.T) {
	v := newService(t, Config{MaxBytes: 1 << 20, Spools: 2, ReadsPerOwner: 2, SpoolBytes: 4 << 20})
	ctx := context.Background()
	var ids []string
	for _, owner := range []string{"a", "a", "b"} {
		id, err := save(v, owner, snapshot.KindUser, bytes.Repeat([]byte("s"), 600<<10))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	first, err := v.Open(ctx, ids[0], "a")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := v.Open(short, ids[1], "a"); !errors.Is(err, ErrNoRoom) {
		t.Errorf("a's second snapshot past its share of the spool: %v, want it to wait, then ErrNoRoom", err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
	defer bcancel()
	b, err := v.Open(bctx, ids[2], "b")
	if err != nil {
		t.Fatalf("b's snapshot while a holds its share: %v", err)
	}
	b.Close()
	opened := make(chan error, 1)
	go func() {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		s, err := v.Open(actx, ids[1], "a")
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	time.Sleep(200 * time.Millisecond) // waiting for room
	first.Close()
	if err := <-opened; err != nil {
		t.Errorf("a's second snapshot once its first closed: %v", err)
	}
}
