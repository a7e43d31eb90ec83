package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// storeBytes is what the node's workspace store holds on disk besides its
// records: blobs, variants and staged files.
func storeBytes(t *testing.T, m *Manager) int64 {
	t.Helper()
	var total int64
	for _, dir := range []string{m.cache.blobs, m.cache.variants, m.cache.tmp} {
		n, _ := dirBytes(t, dir)
		total += n
	}
	return total
}

// Writes the API refuses (over the quota, over the file limit, a path
// that clashes with a file) leave no byte on disk, however often they
// come: the bytes are staged, held to the room left and dropped.
func TestRefusedWritesLeaveNothing(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	mustWrite(t, m, alice, ref, "f", "a file")
	before := storeBytes(t, m)
	big := strings.Repeat("x", 4<<20)
	for i := range 8 {
		body := big + strings.Repeat("y", i) // new content each time
		if _, err := m.WriteFile(ctx, alice, ref, "big", strings.NewReader(body), 0, 1<<30); !errors.Is(err, ErrQuota) {
			t.Fatalf("write %d of 4 MiB into a 1 MiB quota: %v", i, err)
		}
		if _, err := m.WriteFile(ctx, alice, ref, "big", strings.NewReader(body), 0, 1<<10); !errors.Is(err, ErrLimit) {
			t.Fatalf("write %d over the file limit: %v", i, err)
		}
		// Fits the quota, but "f" is a file, not a directory.
		if _, err := m.WriteFile(ctx, alice, ref, "f/g", strings.NewReader(body[:1000+i]), 0, 1<<30); !errors.Is(err, ErrInvalid) {
			t.Fatalf("write %d under a file: %v", i, err)
		}
		tarball := makeTar(t, tarEntry{name: "small", body: "fits"}, tarEntry{name: "huge", body: body})
		if _, err := m.Upload(ctx, alice, ref, "", bytes.NewReader(tarball), bigLimits); !errors.Is(err, ErrQuota) {
			t.Fatalf("upload %d of 4 MiB into a 1 MiB quota: %v", i, err)
		}
		tarball = makeTar(t, tarEntry{name: "ok", body: body[:2000+i]}, tarEntry{name: "f/g", body: "under a file"})
		if _, err := m.Upload(ctx, alice, ref, "", bytes.NewReader(tarball), bigLimits); !errors.Is(err, ErrInvalid) {
			t.Fatalf("upload %d under a file: %v", i, err)
		}
	}
	if after := storeBytes(t, m); after != before {
		t.Errorf("the store held %d bytes before 40 refused writes and %d after", before, after)
	}
	if info, _ := m.Get(ctx, alice, ref); info.Version != 1 {
		t.Errorf("refused writes made versions: %+v", info)
	}
	// A write that fits still works, and replacing a file counts its growth only.
	mustWrite(t, m, alice, ref, "big", strings.Repeat("z", 1<<20-len("a file")))
	mustWrite(t, m, alice, ref, "big", strings.Repeat("Z", 1<<20-len("a file")))
}

// The server's collector removes what a deleted workspace held, soon
// after the Delete, without waiting for its interval.
func TestCollectorRunsAfterDelete(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	empty := storeBytes(t, m)
	mustWrite(t, m, alice, ref, "f", strings.Repeat("d", 1<<20))
	if got := storeBytes(t, m); got < empty+1<<20 {
		t.Fatalf("the store holds %d bytes after a 1 MiB write", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Collect(cctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	if err := m.Delete(ctx, alice, ref); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for storeBytes(t, m) >= 1<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the Delete the store still holds %d bytes", storeBytes(t, m))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Rewriting a file with the same bytes (only its time changes) costs no
// copy of it, in the store or in the trees runs mount.
func TestTouchedFilesMakeNoCopies(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	uid, gid := sandboxIDs()
	m, err := OpenLocal(Config{Dir: t.TempDir(), UID: uid, GID: gid, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	body := strings.Repeat("t", 4<<20)
	var lowers []string
	for i := range 6 {
		now = now.Add(time.Minute)
		mustWrite(t, m, alice, ref, "f", body)
		mt, err := m.Prepare(ctx, alice, ref, ReadOnly, "touch"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		lowers = append(lowers, mt.Lower)
		defer mt.Release()
	}
	if info, _ := m.Get(ctx, alice, ref); info.Version != 6 {
		t.Fatalf("six writes with new times made %+v", info)
	}
	if got := storeBytes(t, m); got > 4<<20+64<<10 {
		t.Errorf("six versions of one 4 MiB file take %d bytes", got)
	}
	if n, _ := dirBytes(t, m.cache.variants); n != 0 {
		t.Errorf("variants take %d bytes", n)
	}
	for _, l := range lowers {
		if got, err := os.ReadFile(filepath.Join(l, "f")); err != nil || len(got) != len(body) {
			t.Errorf("tree %s holds %d bytes: %v", l, len(got), err)
		}
	}
}

// What only old versions hold is bounded by the workspace's quota: a
// workspace rewritten with new content keeps fewer versions, and a
// collection leaves about twice the quota on disk, not KeepVersions times.
func TestHistoryHeldToTheQuota(t *testing.T) {
	m := newLocal(t, Limits{KeepVersions: 20})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	for i := range 20 {
		mustWrite(t, m, alice, ref, "f", strings.Repeat(string(rune('a'+i)), 600<<10))
	}
	if _, err := m.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := storeBytes(t, m); got > 2<<20+64<<10 {
		t.Errorf("20 versions of a 1 MiB workspace keep %d bytes", got)
	}
	vs, err := m.Versions(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) < 2 || len(vs) > 3 {
		t.Errorf("kept %d versions of 600 KiB each under a 1 MiB quota", len(vs))
	}
	// Small edits keep the whole history.
	mustCreate(t, m, alice, "v", 1<<20)
	for i := range 25 {
		mustWrite(t, m, alice, Ref{Name: "v"}, "f", strings.Repeat("s", 1000+i))
	}
	if vs, _ := m.Versions(ctx, alice, Ref{Name: "v"}); len(vs) != 20 {
		t.Errorf("kept %d small versions, want 20", len(vs))
	}
}

// Deduplication stays within a key: another key's copy of the same
// content is stored again, so the store's growth tells a key nothing about
// what other keys hold; a key's own copies are stored once.
func TestDedupWithinAKeyOnly(t *testing.T) {
	m := newLocal(t, Limits{})
	secret := "API_TOKEN=hunter2-7731\n" + strings.Repeat("#", 64<<10)
	mustCreate(t, m, alice, "a", 0)
	mustCreate(t, m, alice, "a2", 0)
	mustCreate(t, m, bob, "b", 0)
	mustWrite(t, m, alice, Ref{Name: "a"}, ".env", secret)
	blobs := func() int64 { n, _ := dirBytes(t, m.cache.blobs); return n }
	before := blobs()
	mustWrite(t, m, bob, Ref{Name: "b"}, "guess", secret)
	if grew := blobs() - before; grew < int64(len(secret)) {
		t.Errorf("bob's copy of alice's file grew the store by %d bytes, less than its %d: deduplicated across keys", grew, len(secret))
	}
	before = blobs()
	mustWrite(t, m, alice, Ref{Name: "a2"}, "copy", secret)
	if grew := blobs() - before; grew >= int64(len(secret)) {
		t.Errorf("alice's second copy grew the store by %d bytes: not deduplicated within the key", grew)
	}
	if readFile(t, m, bob, Ref{Name: "b"}, Head, "guess") != secret || readFile(t, m, alice, Ref{Name: "a2"}, Head, "copy") != secret {
		t.Error("the copies do not read back")
	}
}

// A measurement is reused for StatsFor (so /health and scrapes do not walk
// the cache each time), one is made at a time, and a walk stops when its
// context ends.
func TestStatsReusedAndBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m, err := OpenLocal(Config{Dir: t.TempDir(), UID: -1, GID: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, m, alice, "w", 0)
	mustWrite(t, m, alice, Ref{Name: "w"}, "a", "12345")
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Stats(done); !errors.Is(err, context.Canceled) {
		t.Errorf("a measurement with an ended context: %v", err)
	}
	first, err := m.Stats(ctx)
	if err != nil || first.Bytes != 5 {
		t.Fatalf("stats %+v, %v", first, err)
	}
	mustWrite(t, m, alice, Ref{Name: "w"}, "b", "678")
	if again, _ := m.Stats(ctx); again != first {
		t.Errorf("within StatsFor: %+v, want the reused %+v", again, first)
	}
	now = now.Add(StatsFor)
	if later, _ := m.Stats(ctx); later.Bytes != 8 || later.CacheBytes <= first.CacheBytes {
		t.Errorf("after StatsFor: %+v, want 8 bytes and a larger cache than %+v", later, first)
	}
}

// A conflict copy refused over the quota is reported as not kept, and is
// not in the workspace.
func TestConflictCopyOverQuotaNotReportedKept(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 1<<20)
	mk := func(b byte) string { return strings.Repeat(string([]byte{b}), 450<<10) }
	mustWrite(t, m, alice, ref, "f", mk('a'))
	rec, key, err := m.find(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, m, alice, ref, "f", mk('c'))
	mustWrite(t, m, alice, ref, "h", strings.Repeat("h", 400<<10))
	// A run that started at version 1 changed f too: its copy cannot fit.
	done := m.writing()
	h, size, err := m.cache.ingest(strings.NewReader(mk('b')), 1<<20, attrs{Mode: 0o644, MTime: 1}, saltOf(alice.Name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.commit(ctx, key, rec.ID, changeSet{base: rec.Head, partial: true, source: "run",
		changes: map[string]*entry{"f": {Path: "f", Kind: kindFile, Hash: h, Size: size, Mode: 0o644, MTime: 1}}})
	done()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Conflicts) != 1 || c.Conflicts[0].KeptAs != "" || !strings.Contains(c.Conflicts[0].Reason, "not kept") {
		t.Errorf("conflicts %+v, want f reported not kept", c.Conflicts)
	}
	if len(c.Refused) != 1 || !strings.Contains(c.Refused[0].Reason, "quota") {
		t.Errorf("refused %+v", c.Refused)
	}
	got := files(t, m, alice, ref, Head)
	if len(got) != 2 || got["f"] != mk('c') {
		t.Errorf("the head holds %d paths", len(got))
	}
}
