package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/store"
)

// Fleet tests start an embedded NATS server: they run under the jail
// tests' lock.

// startStore opens the store of a one-server fleet: the buckets open
// through it as serve opens them.
func startStore(t *testing.T) *store.NATS {
	t.Helper()
	emb, err := store.StartEmbedded(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := emb.Close(); err != nil {
			t.Errorf("closing NATS: %v", err)
		}
	})
	st, err := store.Open(context.Background(), emb.Conn(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// countingBlobs counts what a node fetches from the store.
type countingBlobs struct {
	blobStore
	gets atomic.Int64
}

func (c *countingBlobs) get(ctx context.Context, h string, w io.Writer) error {
	c.gets.Add(1)
	return c.blobStore.get(ctx, h, w)
}

func openNode(t *testing.T, st *store.NATS, now func() time.Time) (*Manager, *countingBlobs) {
	t.Helper()
	uid, gid := sandboxIDs()
	m, err := OpenFleet(context.Background(), st, Config{Dir: t.TempDir(), UID: uid, GID: gid, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	cb := &countingBlobs{blobStore: m.cache.remote}
	m.cache.remote = cb
	return m, cb
}

func storeSize(t *testing.T, m *Manager) int64 {
	t.Helper()
	n, err := m.cache.remote.size(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// What node 1 writes, node 3 reads byte for byte; node 3's cache fetches
// what it lacks, and after a one-file change only that file (and the
// manifest pages that changed).
func TestFleetNodesShareWorkspaces(t *testing.T) {
	fleet := startStore(t)
	n1, _ := openNode(t, fleet, nil)
	n3, fetch3 := openNode(t, fleet, nil)
	ref := Ref{Name: "w"}
	mustCreate(t, n1, alice, "w", 0)
	want := map[string]string{}
	var entries []tarEntry
	for i := range 300 {
		p := fmt.Sprintf("d%d/f%03d.bin", i%7, i)
		body := strings.Repeat(fmt.Sprintf("%03d", i), 1000+i)
		want[p] = body
		entries = append(entries, tarEntry{name: p, body: body})
	}
	if _, err := n1.Upload(ctx, alice, ref, "", strings.NewReader(string(makeTar(t, entries...))), bigLimits); err != nil {
		t.Fatal(err)
	}
	got := files(t, n3, alice, ref, Head)
	for p, body := range want {
		if got[p] != body {
			t.Fatalf("node 3 reads %s as %d bytes, want %d", p, len(got[p]), len(body))
		}
	}
	if _, err := n3.Prepare(ctx, alice, ref, ReadOnly, "r1"); err != nil {
		t.Fatal(err)
	}
	before := storeSize(t, n1)
	fetched := fetch3.gets.Load()
	mustWrite(t, n1, alice, ref, "d3/f003.bin", "changed on node 1")
	growth := storeSize(t, n1) - before
	mt, err := n3.Prepare(ctx, alice, ref, ReadOnly, "r2")
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Release()
	b, err := os.ReadFile(mt.Lower + "/d3/f003.bin")
	if err != nil || string(b) != "changed on node 1" {
		t.Errorf("node 3's tree: %q, %v", b, err)
	}
	// The file, one or two pages, the root.
	if n := fetch3.gets.Load() - fetched; n < 2 || n > 4 {
		t.Errorf("node 3 fetched %d blobs for a one-file change", n)
	}
	if growth > 100_000 {
		t.Errorf("a one-file change grew the store by %d bytes", growth)
	}
	t.Logf("store %d bytes; a one-file change grew it by %d bytes; node 3 fetched %d blobs for it",
		before, growth, fetch3.gets.Load()-fetched)
}

// Writers on two nodes at once: distinct files all land; the same file is
// a conflict reported to the later writer.
func TestFleetConcurrentWriters(t *testing.T) {
	fleet := startStore(t)
	n1, _ := openNode(t, fleet, nil)
	n2, _ := openNode(t, fleet, nil)
	ref := Ref{Name: "w"}
	mustCreate(t, n1, alice, "w", 0)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		node := n1
		if i%2 == 1 {
			node = n2
		}
		wg.Go(func() {
			_, err := node.WriteFile(ctx, alice, ref, fmt.Sprintf("out/%02d", i), strings.NewReader(fmt.Sprint(i)), 0, 100)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := files(t, n2, alice, ref, Head)
	for i := range 20 {
		if got[fmt.Sprintf("out/%02d", i)] != fmt.Sprint(i) {
			t.Errorf("file %d: %q", i, got[fmt.Sprintf("out/%02d", i)])
		}
	}
	// Two change sets against version 20 for the same file, one per node.
	rec, key, err := n1.find(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	commitOne := func(m *Manager, body string) Commit {
		defer m.writing()()
		h, size, err := m.cache.ingest(strings.NewReader(body), 100, attrs{Mode: 0o644, MTime: 1}, saltOf(alice.Name))
		if err != nil {
			t.Fatal(err)
		}
		c, err := m.commit(ctx, key, rec.ID, changeSet{base: rec.Head, partial: true,
			changes: map[string]*entry{"out/00": {Path: "out/00", Kind: kindFile, Hash: h, Size: size, Mode: 0o644, MTime: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, second := commitOne(n1, "node 1"), commitOne(n2, "node 2")
	if len(first.Conflicts) != 0 || len(second.Conflicts) != 1 || second.Conflicts[0].KeptAs != "out/00.conflict-22" {
		t.Fatalf("commits %+v then %+v", first, second)
	}
	got = files(t, n1, alice, ref, Head)
	if got["out/00"] != "node 1" || got["out/00.conflict-22"] != "node 2" {
		t.Errorf("out/00 %q, conflict copy %q", got["out/00"], got["out/00.conflict-22"])
	}
}

// A blob whose bytes do not match its name is refused, not served.
func TestFleetRefusesACorruptBlob(t *testing.T) {
	fleet := startStore(t)
	n1, _ := openNode(t, fleet, nil)
	n3, _ := openNode(t, fleet, nil)
	ref := Ref{Name: "w"}
	mustCreate(t, n1, alice, "w", 0)
	mustWrite(t, n1, alice, ref, "f", "genuine")
	obs, err := fleet.JetStream().ObjectStore(ctx, BlobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, fileHash(alice.Name, []byte("genuine")), "forged"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n3.Open(ctx, alice, ref, Head, "f"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("reading a forged blob: %v, want ErrCorrupt", err)
	}
}

// The fleet's collector spares young unreferenced blobs (a commit on
// another node may be about to name them) and removes old ones.
func TestFleetGC(t *testing.T) {
	fleet := startStore(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	n1, _ := openNode(t, fleet, clock)
	ref := Ref{Name: "w"}
	mustCreate(t, n1, alice, "w", 0)
	mustWrite(t, n1, alice, ref, "f", "in a workspace about to go")
	mustCreate(t, n1, alice, "v", 0)
	mustWrite(t, n1, alice, Ref{Name: "v"}, "g", "stays")
	if err := n1.Delete(ctx, alice, ref); err != nil {
		t.Fatal(err)
	}
	st, err := n1.GC(ctx)
	if err != nil || st.BlobsRemoved != 0 {
		t.Fatalf("young blobs: %+v, %v", st, err)
	}
	mu.Lock()
	now = now.Add(2 * GCGrace)
	mu.Unlock()
	if st, err = n1.GC(ctx); err != nil || st.BlobsRemoved < 2 {
		t.Fatalf("old blobs: %+v, %v", st, err)
	}
	ok, err := n1.cache.remote.has(ctx, fileHash(alice.Name, []byte("in a workspace about to go")))
	if err != nil || ok {
		t.Errorf("the deleted workspace's blob: in the store %v, %v", ok, err)
	}
	n3, _ := openNode(t, fleet, clock)
	if got := readFile(t, n3, alice, Ref{Name: "v"}, Head, "g"); got != "stays" {
		t.Errorf("kept file reads %q", got)
	}
}
