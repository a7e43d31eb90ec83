package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var ctx = context.Background()

func TestCreateListGetDelete(t *testing.T) {
	m := newLocal(t, Limits{MaxWorkspaces: 2})
	info, err := m.Create(ctx, alice, "repo", 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner != "alice" || info.Version != 0 || info.QuotaBytes != 1<<30 || info.Files != 0 {
		t.Errorf("created %+v", info)
	}
	if _, err := m.Create(ctx, alice, "repo", 0); !errors.Is(err, ErrExists) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	for _, name := range []string{"", "a/b", "../x", "a.b"} {
		if _, err := m.Create(ctx, alice, name, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("create %q: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := m.Create(ctx, alice, "huge", 17<<30); !errors.Is(err, ErrInvalid) {
		t.Errorf("quota beyond the max: %v, want ErrInvalid", err)
	}
	mustCreate(t, m, alice, "data", 10<<20)
	if _, err := m.Create(ctx, alice, "third", 0); !errors.Is(err, ErrLimit) {
		t.Errorf("third workspace of a key limited to 2: %v, want ErrLimit", err)
	}
	list, err := m.List(ctx, alice, "")
	if err != nil || len(list) != 2 || list[0].Name != "data" || list[1].Name != "repo" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := m.Delete(ctx, alice, Ref{Name: "repo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, alice, Ref{Name: "repo"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	// The name is free again, for a new workspace with nothing of the old.
	mustCreate(t, m, alice, "repo", 0)
	if info, _ := m.Get(ctx, alice, Ref{Name: "repo"}); info.Version != 0 {
		t.Errorf("recreated workspace at version %d", info.Version)
	}
}

// Another key is told "not found" by every operation, exactly as for a
// workspace that does not exist; an operator key reaches it.
func TestTenancy(t *testing.T) {
	m := newLocal(t, Limits{})
	mustCreate(t, m, alice, "w", 0)
	mustWrite(t, m, alice, Ref{Name: "w"}, "secret.txt", "alice's")
	mine, theirs := Ref{Name: "w"}, Ref{Owner: "alice", Name: "w"}
	tarball := makeTar(t, tarEntry{name: "x", body: "x"})
	calls := map[string]func(Caller, Ref) error{
		"get":   func(c Caller, r Ref) error { _, err := m.Get(ctx, c, r); return err },
		"files": func(c Caller, r Ref) error { _, err := m.Files(ctx, c, r, Head, ""); return err },
		"open":  func(c Caller, r Ref) error { _, _, err := m.Open(ctx, c, r, Head, "secret.txt"); return err },
		"write": func(c Caller, r Ref) error {
			_, err := m.WriteFile(ctx, c, r, "x", strings.NewReader("x"), 0, 10)
			return err
		},
		"upload": func(c Caller, r Ref) error {
			_, err := m.Upload(ctx, c, r, "", bytes.NewReader(tarball), bigLimits)
			return err
		},
		"tar":      func(c Caller, r Ref) error { return m.Tar(ctx, c, r, Head, "", io.Discard) },
		"remove":   func(c Caller, r Ref) error { _, err := m.Remove(ctx, c, r, "secret.txt"); return err },
		"versions": func(c Caller, r Ref) error { _, err := m.Versions(ctx, c, r); return err },
		"restore":  func(c Caller, r Ref) error { _, err := m.Restore(ctx, c, r, 0); return err },
		"mount": func(c Caller, r Ref) error {
			mt, err := m.Prepare(ctx, c, r, ReadOnly, "run-"+c.Name)
			if err == nil {
				err = mt.Release()
			}
			return err
		},
		"delete": func(c Caller, r Ref) error { return m.Delete(ctx, c, r) },
	}
	for name, op := range calls {
		for _, ref := range []Ref{mine, theirs} {
			err := op(bob, ref)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("bob %s %+v: %v, want ErrNotFound", name, ref, err)
			}
			if err != nil && strings.Contains(err.Error(), "alice") {
				t.Errorf("bob %s: the error names the owner: %v", name, err)
			}
		}
	}
	if _, err := m.List(ctx, bob, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob lists alice's: %v", err)
	}
	if list, _ := m.List(ctx, bob, ""); len(list) != 0 {
		t.Errorf("bob's list shows %+v", list)
	}
	// Bob's own "w" is another workspace.
	mustCreate(t, m, bob, "w", 0)
	if got := files(t, m, bob, mine, Head); len(got) != 0 {
		t.Errorf("bob's w holds %v", got)
	}
	// The operator sees and changes alice's, the delete last.
	if got := readFile(t, m, ops, theirs, Head, "secret.txt"); got != "alice's" {
		t.Errorf("operator reads %q", got)
	}
	all, err := m.List(ctx, ops, AllOwners)
	if err != nil || len(all) != 2 {
		t.Errorf("operator lists all: %+v, %v", all, err)
	}
	for _, name := range []string{"get", "files", "open", "tar", "versions", "mount", "write", "upload", "remove", "restore"} {
		if err := calls[name](ops, theirs); err != nil {
			t.Errorf("operator %s: %v", name, err)
		}
	}
	if err := calls["delete"](ops, theirs); err != nil {
		t.Errorf("operator delete: %v", err)
	}
}

func TestWriteReadListRemove(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	c1 := mustWrite(t, m, alice, ref, "src/app/main.py", "print(1)\n")
	c2 := mustWrite(t, m, alice, ref, "README", "hello")
	if c1.Version != 1 || c2.Version != 2 || !c2.Changed || c2.Added != 1 {
		t.Errorf("commits %+v %+v", c1, c2)
	}
	want := map[string]string{"src": "/", "src/app": "/", "src/app/main.py": "print(1)\n", "README": "hello"}
	if got := files(t, m, alice, ref, Head); !maps.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	sub, err := m.Files(ctx, alice, ref, Head, "src/app")
	if err != nil || len(sub) != 1 || sub[0].Path != "src/app/main.py" || sub[0].Size != 9 || sub[0].Mode != 0o644 {
		t.Errorf("files of src/app: %+v, %v", sub, err)
	}
	if _, err := m.Files(ctx, alice, ref, Head, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("listing a missing folder: %v", err)
	}
	// Writing what is there already makes no version.
	if c := mustWrite(t, m, alice, ref, "README", "hello"); c.Changed && c.Modified == 0 {
		t.Errorf("rewrite %+v", c)
	}
	if _, err := m.WriteFile(ctx, alice, ref, "README/x", strings.NewReader("x"), 0, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("writing under a file: %v", err)
	}
	if _, err := m.WriteFile(ctx, alice, ref, "src", strings.NewReader("x"), 0, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("writing a folder's path: %v", err)
	}
	if _, err := m.WriteFile(ctx, alice, ref, "big", strings.NewReader("12345"), 0, 4); !errors.Is(err, ErrLimit) {
		t.Errorf("writing beyond the size limit: %v", err)
	}
	if _, _, err := m.Open(ctx, alice, ref, Head, "src"); !errors.Is(err, ErrInvalid) {
		t.Errorf("opening a folder: %v", err)
	}
	rm, err := m.Remove(ctx, alice, ref, "src")
	if err != nil || rm.Deleted != 3 {
		t.Fatalf("remove: %+v, %v", rm, err)
	}
	if got := files(t, m, alice, ref, Head); !maps.Equal(got, map[string]string{"README": "hello"}) {
		t.Errorf("after remove: %v", got)
	}
	// Old versions stay readable.
	if got := readFile(t, m, alice, ref, 1, "src/app/main.py"); got != "print(1)\n" {
		t.Errorf("version 1 holds %q", got)
	}
	if _, err := m.Remove(ctx, alice, ref, "src"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing what is gone: %v", err)
	}
}

func TestUploadAndTar(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	tarball := makeTar(t,
		tarEntry{name: "./", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "pkg/", typ: tar.TypeDir, mode: 0o700},
		tarEntry{name: "pkg/mod.py", body: "x = 1\n"},
		tarEntry{name: "run.sh", body: "#!/bin/sh\n", mode: 0o4777},
		tarEntry{name: "empty/", typ: tar.TypeDir},
	)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarball)
	zw.Close()
	for name, body := range map[string][]byte{"plain": tarball, "gzip": gz.Bytes()} {
		c, err := m.Upload(ctx, alice, ref, "proj", bytes.NewReader(body), bigLimits)
		if err != nil {
			t.Fatalf("%s upload: %v", name, err)
		}
		t.Logf("%s upload: %+v", name, c)
	}
	want := map[string]string{"proj": "/", "proj/pkg": "/", "proj/pkg/mod.py": "x = 1\n", "proj/run.sh": "#!/bin/sh\n", "proj/empty": "/"}
	if got := files(t, m, alice, ref, Head); !maps.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	list, _ := m.Files(ctx, alice, ref, Head, "proj")
	for _, f := range list {
		switch f.Path {
		case "proj/run.sh":
			if f.Mode != 0o755 || !f.ModTime.Equal(time.Unix(1700000000, 0)) {
				t.Errorf("run.sh: mode %v (set-user-ID and group/world write dropped?), mtime %v", f.Mode, f.ModTime)
			}
		case "proj/pkg":
			if f.Mode != 0o700 {
				t.Errorf("pkg mode %v", f.Mode)
			}
		}
	}
	// The tar of a folder has its paths relative to the folder.
	var out bytes.Buffer
	if err := m.Tar(ctx, alice, ref, Head, "proj/pkg", &out); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&out)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "mod.py" {
		t.Fatalf("tar entry %+v, %v", hdr, err)
	}
	if b, _ := io.ReadAll(tr); string(b) != "x = 1\n" {
		t.Errorf("tar content %q", b)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more entries: %v", err)
	}
	if err := m.Tar(ctx, alice, ref, Head, "proj/run.sh", io.Discard); !errors.Is(err, ErrNotFound) {
		t.Errorf("tar of a file: %v", err)
	}
}

func TestUploadRefusesHostileArchives(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	small := UploadLimits{MaxFiles: 3, MaxFileBytes: 100, MaxTotalBytes: 150, MaxTarBytes: 64 << 10}
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(makeTar(t, tarEntry{name: "zeros", body: strings.Repeat("\x00", 1<<20)}))
	zw.Close()
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"symlink", makeTar(t, tarEntry{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}), ErrInvalid},
		{"hard link", makeTar(t, tarEntry{name: "a", body: "a"}, tarEntry{name: "l", typ: tar.TypeLink, link: "a"}), ErrInvalid},
		{"char device", makeTar(t, tarEntry{name: "null", typ: tar.TypeChar}), ErrInvalid},
		{"block device", makeTar(t, tarEntry{name: "sda", typ: tar.TypeBlock}), ErrInvalid},
		{"fifo", makeTar(t, tarEntry{name: "p", typ: tar.TypeFifo}), ErrInvalid},
		{"traversal", makeTar(t, tarEntry{name: "../../etc/cron.d/x", body: "x"}), ErrInvalid},
		{"absolute", makeTar(t, tarEntry{name: "/etc/passwd", body: "x"}), ErrInvalid},
		{"duplicate", makeTar(t, tarEntry{name: "a", body: "1"}, tarEntry{name: "a", body: "2"}), ErrInvalid},
		{"file used as a folder", makeTar(t, tarEntry{name: "a", body: "1"}, tarEntry{name: "a/b", body: "2"}), ErrInvalid},
		{"folder used as a file", makeTar(t, tarEntry{name: "a/b", body: "1"}, tarEntry{name: "a", body: "2"}), ErrInvalid},
		{"too many files", makeTar(t, tarEntry{name: "1", body: "1"}, tarEntry{name: "2", body: "2"}, tarEntry{name: "3", body: "3"}, tarEntry{name: "4", body: "4"}), ErrLimit},
		{"file too big", makeTar(t, tarEntry{name: "big", body: strings.Repeat("x", 101)}), ErrLimit},
		{"huge sparse header", makeTar(t, tarEntry{name: "sparse", size: 1 << 40}), ErrLimit},
		{"total too big", makeTar(t, tarEntry{name: "a", body: strings.Repeat("x", 80)}, tarEntry{name: "b", body: strings.Repeat("x", 80)}), ErrLimit},
		{"gzip bomb", bomb.Bytes(), ErrLimit},
		{"no files", makeTar(t), ErrInvalid},
		{"not a tar", []byte("hello, this is not a tar archive at all, but it is long enough to be read as a header block"), ErrInvalid},
	} {
		_, err := m.Upload(ctx, alice, ref, "", bytes.NewReader(tc.body), small)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if info, _ := m.Get(ctx, alice, ref); info.Version != 0 {
		t.Errorf("a refused upload made version %d", info.Version)
	}
	// Into a folder that is a file: refused whole.
	mustWrite(t, m, alice, ref, "f", "file")
	if _, err := m.Upload(ctx, alice, ref, "f", bytes.NewReader(makeTar(t, tarEntry{name: "x", body: "x"})), small); !errors.Is(err, ErrInvalid) {
		t.Errorf("upload into a file: %v", err)
	}
	if _, err := m.Upload(ctx, alice, ref, "../up", bytes.NewReader(makeTar(t, tarEntry{name: "x", body: "x"})), small); !errors.Is(err, ErrInvalid) {
		t.Errorf("upload into ../up: %v", err)
	}
}

func TestRestoreAndRetention(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	uid, gid := sandboxIDs()
	m, err := OpenLocal(Config{Dir: t.TempDir(), UID: uid, GID: gid, Now: clock,
		Limits: Limits{KeepVersions: 4, KeepFor: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	for i := 1; i <= 6; i++ {
		mustWrite(t, m, alice, ref, "f", fmt.Sprint("v", i))
	}
	vs, err := m.Versions(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int64
	for _, v := range vs {
		nums = append(nums, v.Number)
	}
	if fmt.Sprint(nums) != "[3 4 5 6]" {
		t.Errorf("kept versions %v, want [3 4 5 6]", nums)
	}
	if _, err := m.Restore(ctx, alice, ref, 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("restoring a pruned version: %v", err)
	}
	c, err := m.Restore(ctx, alice, ref, 3)
	if err != nil || c.Version != 7 || !c.Changed {
		t.Fatalf("restore: %+v, %v", c, err)
	}
	if got := readFile(t, m, alice, ref, Head, "f"); got != "v3" {
		t.Errorf("after restoring 3: %q", got)
	}
	vs, _ = m.Versions(ctx, alice, ref)
	if last := vs[len(vs)-1]; last.Source != "restore of version 3" || last.Parent != 6 {
		t.Errorf("restored version %+v", last)
	}
	// Three days on, the versions replaced three days ago go; the one
	// replaced now stays, however old it is itself.
	mu.Lock()
	now = now.Add(72 * time.Hour)
	mu.Unlock()
	mustWrite(t, m, alice, ref, "g", "new")
	vs, _ = m.Versions(ctx, alice, ref)
	if len(vs) != 2 || vs[0].Number != 7 || vs[1].Number != 8 {
		t.Errorf("after three days: %+v", vs)
	}
	if got := readFile(t, m, alice, ref, 7, "f"); got != "v3" {
		t.Errorf("version 7: %q", got)
	}
}

func TestQuotas(t *testing.T) {
	m := newLocal(t, Limits{KeyQuotaBytes: 150})
	w, v := Ref{Name: "w"}, Ref{Name: "v"}
	mustCreate(t, m, alice, "w", 100)
	mustCreate(t, m, alice, "v", 100)
	mustWrite(t, m, alice, w, "a", strings.Repeat("a", 60))
	if _, err := m.WriteFile(ctx, alice, w, "b", strings.NewReader(strings.Repeat("b", 41)), 0, 1<<20); !errors.Is(err, ErrQuota) {
		t.Errorf("beyond the workspace quota: %v", err)
	}
	mustWrite(t, m, alice, w, "b", strings.Repeat("b", 40)) // exactly the quota
	// The key has 50 bytes left for v, though v's own quota is 100.
	if _, err := m.WriteFile(ctx, alice, v, "c", strings.NewReader(strings.Repeat("c", 51)), 0, 1<<20); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "key") {
		t.Errorf("beyond the key quota: %v", err)
	}
	mustWrite(t, m, alice, v, "c", strings.Repeat("c", 50))
	// Replacing a file counts its growth only.
	mustWrite(t, m, alice, w, "a", strings.Repeat("A", 60))
	if info, _ := m.Get(ctx, alice, w); info.Bytes != 100 || info.Version != 3 {
		t.Errorf("w: %+v", info)
	}
	// Another key's quota is its own.
	mustCreate(t, m, bob, "w", 100)
	mustWrite(t, m, bob, w, "a", strings.Repeat("a", 100))
	// The entry limit.
	m2 := newLocal(t, Limits{MaxEntries: 3})
	mustCreate(t, m2, alice, "w", 0)
	mustWrite(t, m2, alice, w, "d/a", "1")
	mustWrite(t, m2, alice, w, "d/b", "1")
	if _, err := m2.WriteFile(ctx, alice, w, "d/c", strings.NewReader("1"), 0, 10); !errors.Is(err, ErrLimit) {
		t.Errorf("beyond the entry limit: %v", err)
	}
}

// A version that changes one file of 10,000 stores that file's bytes, one
// or two manifest pages and a root: not the workspace again.
func TestOneFileChangeStoresOneFile(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	var entries []tarEntry
	for i := range 10_000 {
		entries = append(entries, tarEntry{name: fmt.Sprintf("pkg%02d/mod%05d.py", i%50, i), body: fmt.Sprintf("%0512d\n", i)})
	}
	if _, err := m.Upload(ctx, alice, ref, "", bytes.NewReader(makeTar(t, entries...)), bigLimits); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(m.dirs.root, "blobs")
	before, nBefore := dirBytes(t, blobs)
	change := strings.Repeat("z", 4096)
	mustWrite(t, m, alice, ref, "pkg07/mod00007.py", change)
	after, nAfter := dirBytes(t, blobs)
	growth := after - before
	t.Logf("10,000 files, %d bytes in %d blobs; a one-file change (%d bytes) stored %d bytes in %d blobs",
		before, nBefore, len(change), growth, nAfter-nBefore)
	if nAfter-nBefore > 4 {
		t.Errorf("the change stored %d blobs; want the file, at most two pages and a root", nAfter-nBefore)
	}
	if growth < int64(len(change)) || growth > int64(len(change))+150_000 {
		t.Errorf("the change stored %d bytes for a %d-byte file", growth, len(change))
	}
	// The same content elsewhere costs no bytes of content.
	mustWrite(t, m, alice, ref, "copy.py", change)
	again, _ := dirBytes(t, blobs)
	if again-after > 150_000 || again-after < 0 {
		t.Errorf("a duplicate stored %d bytes", again-after)
	}
	if fileBlobs := again - after; fileBlobs >= int64(len(change))+30_000 {
		t.Logf("duplicate growth %d", fileBlobs)
	}
}

// Writers that change different files from the same base all land; writers
// that change the same file are told, and both contents are kept.
func TestConcurrentCommitters(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	mustWrite(t, m, alice, ref, "shared.txt", "base")
	rec, key, err := m.find(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	// 20 committers, each with a change set made against the same base:
	// one file of its own, and for the first five a new shared.txt.
	const n = 20
	results := make([]Commit, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			done := m.writing()
			defer done()
			changes := map[string]*entry{}
			put := func(p, body string) {
				h, size, err := m.cache.ingest(strings.NewReader(body), 1<<20, attrs{Mode: 0o644, MTime: 1}, saltOf(alice.Name))
				if err != nil {
					errs[i] = err
					return
				}
				changes[p] = &entry{Path: p, Kind: kindFile, Hash: h, Size: size, Mode: 0o644, MTime: 1}
			}
			put(fmt.Sprintf("out/run%02d.txt", i), fmt.Sprint("run ", i))
			changes["out"] = &entry{Path: "out", Kind: kindDir, Mode: 0o755}
			if i < 5 {
				put("shared.txt", fmt.Sprint("from run ", i))
			}
			results[i], errs[i] = m.commit(ctx, key, rec.ID, changeSet{base: rec.Head, changes: changes, source: fmt.Sprint("run ", i), partial: true})
		})
	}
	wg.Wait()
	got := files(t, m, alice, ref, Head)
	versions := map[int64]bool{}
	conflicts := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("committer %d: %v", i, errs[i])
		}
		if body := got[fmt.Sprintf("out/run%02d.txt", i)]; body != fmt.Sprint("run ", i) {
			t.Errorf("run %d's file holds %q", i, body)
		}
		versions[results[i].Version] = true
		for _, c := range results[i].Conflicts {
			conflicts++
			if c.Path != "shared.txt" || got[c.KeptAs] != fmt.Sprint("from run ", i) {
				t.Errorf("run %d: conflict %+v; kept as holds %q", i, c, got[c.KeptAs])
			}
		}
	}
	if len(versions) != n {
		t.Errorf("%d distinct versions for %d commits", len(versions), n)
	}
	// Of the five that changed shared.txt, the first to commit won and
	// the four others were each told where their content is.
	if conflicts != 4 {
		t.Errorf("%d conflicts, want 4", conflicts)
	}
	if !strings.HasPrefix(got["shared.txt"], "from run ") {
		t.Errorf("shared.txt holds %q", got["shared.txt"])
	}
}

// The collector removes what deleted workspaces and pruned versions
// alone referenced, and nothing a kept version needs.
func TestGC(t *testing.T) {
	m := newLocal(t, Limits{KeepVersions: 2})
	w, v := Ref{Name: "w"}, Ref{Name: "v"}
	mustCreate(t, m, alice, "w", 0)
	mustCreate(t, m, alice, "v", 0)
	mustWrite(t, m, alice, w, "gone", "only in a deleted workspace")
	mustWrite(t, m, alice, v, "f", "one")
	mustWrite(t, m, alice, v, "f", "two")
	mustWrite(t, m, alice, v, "f", "three") // "one" is pruned
	mt, err := m.Prepare(ctx, alice, v, ReadOnly, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, alice, w); err != nil {
		t.Fatal(err)
	}
	st, err := m.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	for _, gone := range []string{"only in a deleted workspace", "one"} {
		if m.cache.has(fileHash(alice.Name, []byte(gone))) {
			t.Errorf("blob of %q kept", gone)
		}
	}
	if st.BlobsRemoved < 2 {
		t.Errorf("removed %d blobs", st.BlobsRemoved)
	}
	if got := readFile(t, m, alice, v, Head, "f"); got != "three" {
		t.Errorf("head reads %q", got)
	}
	if got := readFile(t, m, alice, v, 2, "f"); got != "two" {
		t.Errorf("kept version 2 reads %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(mt.Lower, "f")); err != nil || string(b) != "three" {
		t.Errorf("mounted tree: %q, %v", b, err)
	}
	// A tree no run uses and no head is gone. (The write leaves the
	// tree r1 still uses as it is: no tree of "four" is derived from it.)
	mustWrite(t, m, alice, v, "f", "four")
	if err := mt.Release(); err != nil {
		t.Fatal(err)
	}
	if st, err = m.GC(ctx); err != nil || st.TreesRemoved != 1 {
		t.Errorf("second collection: %+v, %v", st, err)
	}
	if _, err := os.Stat(mt.Lower); !os.IsNotExist(err) {
		t.Errorf("tree of an old version: %v", err)
	}
}

// Warm builds the current version's tree ahead of the next Prepare.
func TestWarmBuildsTheCurrentTree(t *testing.T) {
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 0)
	mustWrite(t, m, alice, ref, "a", "content")
	rec, _, err := m.find(ctx, alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(m.dirs.trees, rec.Head.Root)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a tree before any mount or Warm: %v", err)
	}
	if err := m.Warm(ctx, bob, ref); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob warms alice's: %v", err)
	}
	if err := m.Warm(ctx, alice, ref); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "content" {
		t.Errorf("warmed tree: %q, %v", b, err)
	}
	mt, err := m.Prepare(ctx, alice, ref, ReadOnly, "r")
	if err != nil || mt.Lower != dir {
		t.Fatalf("prepare: %+v, %v", mt, err)
	}
	mt.Release()
}

func TestStatsAndModes(t *testing.T) {
	m := newLocal(t, Limits{})
	mustCreate(t, m, alice, "w", 0)
	mustCreate(t, m, bob, "w", 0)
	mustWrite(t, m, alice, Ref{Name: "w"}, "a", "12345")
	mustWrite(t, m, bob, Ref{Name: "w"}, "b", "123")
	mt, err := m.Prepare(ctx, bob, Ref{Name: "w"}, ReadOnly, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Release()
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Workspaces != 2 || st.Bytes != 8 || st.Mounts != 1 || st.StoreBytes != st.CacheBytes || st.CacheBytes < 8 {
		t.Errorf("stats %+v", st)
	}
	for in, want := range map[string]Mode{"": ReadWrite, "rw": ReadWrite, "ro": ReadOnly} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("RW"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseMode(RW): %v", err)
	}
}
