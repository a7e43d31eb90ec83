package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// treeCounts reads the Stats counters of trees built whole and derived.
func treeCounts(t *testing.T, m *Manager) (built, derived int64) {
	t.Helper()
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.TreesBuilt, st.TreesDerived
}

// coldTree builds the tree of the workspace's current version from its
// manifest alone, as a node that never had it would, and returns it.
func coldTree(t *testing.T, m *Manager, ref Ref) string {
	t.Helper()
	rec, _, err := m.find(context.Background(), alice, ref)
	if err != nil {
		t.Fatal(err)
	}
	man, err := m.manifest(context.Background(), rec.Head.Root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cold")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.build(dir, man); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(dir) })
	return dir
}

// node is what a tree holds at one path: its kind and mode, its owner,
// and for a file its inode (trees link the cache's files, so a file equal
// to a cold build's is the very same inode) and content, for a link its
// target. Directory times are left out: a build sets none.
type node struct {
	mode     fs.FileMode
	uid, gid uint32
	ino      uint64
	mtime    int64
	data     string
}

func readTree(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		n := node{mode: fi.Mode(), uid: st.Uid, gid: st.Gid}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n.ino, n.mtime, n.data = st.Ino, fi.ModTime().UnixNano(), string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			if n.data, err = os.Readlink(p); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, got, want string) {
	t.Helper()
	g, w := readTree(t, got), readTree(t, want)
	for p, wn := range w {
		if gn, ok := g[p]; !ok {
			t.Errorf("%s: missing from the derived tree", p)
		} else if gn != wn {
			t.Errorf("%s: derived %+v, a cold build %+v", p, gn, wn)
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			t.Errorf("%s: in the derived tree, not in a cold build", p)
		}
	}
}

// After a run commits, the next mount of the version it made on the same
// node builds no tree: the commit derived it from the base's, and it is
// what a cold build makes, path by path — changed, added, deleted and
// renamed files, a folder replaced by a file and a file by a folder,
// links changed and added, modes of files and folders changed.
func TestCommitWarmsTheNextVersion(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 64<<20)
	upload(t, m, ref, map[string]string{
		"a.txt": "alpha\n", "d/x": "x", "d/y": "y", "gone/one": "1", "gone/sub/two": "2",
		"was-dir/f": "f", "was-file": "w", "touch": "t", "big/keep1": "k1", "big/keep2": "k2",
	})
	mt := prepare(t, m, alice, ref, ReadWrite, "r1")
	mustRun(t, mt, `set -e
		ln -s a.txt link && ln -s d/x link2
		chmod 555 big
		`)
	mustCommit(t, mt)
	if err := mt.Release(); err != nil {
		t.Fatal(err)
	}
	built, derived := treeCounts(t, m)
	mt = prepare(t, m, alice, ref, ReadWrite, "r2")
	if b, d := treeCounts(t, m); b != built || d != derived || d != 1 {
		t.Errorf("the mount after the first commit: trees built %d → %d, derived %d → %d; want none built, one derived", built, b, derived, d)
	}
	mustRun(t, mt, `set -e
		echo beta >> a.txt
		rm d/x
		mv d/y d/y2
		rm -r gone
		rm -r was-dir && printf now-a-file > was-dir
		rm was-file && mkdir -p was-file/deep && printf inside > was-file/deep/f
		touch -d @1600000000 touch
		chmod 700 a.txt
		chmod 750 d
		chmod 755 big
		rm link && ln -s d/y2 link
		ln -s ../a.txt was-file/up
		mkdir -p new/a/b && printf n > new/a/b/c && chmod 500 new/a
		`)
	c := mustCommit(t, mt)
	if c.Version != 3 || !c.Changed {
		t.Fatalf("commit %+v", c)
	}
	if err := mt.Release(); err != nil {
		t.Fatal(err)
	}
	built, derived = treeCounts(t, m)
	mt = prepare(t, m, alice, ref, ReadWrite, "r3")
	if b, d := treeCounts(t, m); b != built || d != 2 {
		t.Errorf("the mount after a commit built %d trees (derived %d); want none built, two derived", b-built, d)
	}
	sameTree(t, mt.Lower, coldTree(t, m, ref))
	if out := mustRun(t, mt, `cat a.txt was-dir was-file/deep/f was-file/up new/a/b/c; readlink link; ls d; [ -e gone ] || echo no-gone`); out != "alpha\nbeta\nnow-a-fileinsidealpha\nbeta\nn"+"d/y2\ny2\nno-gone\n" {
		t.Errorf("the next run read %q", out)
	}
}

// A commit takes the base's tree only when nothing else uses it: while
// another run has the base mounted, its tree stays as it was, and the new
// version's is built at its first mount. A commit that merged another
// writer's version in derives a tree equal to a cold build too.
func TestDerivedTreeLeavesMountedTreesAlone(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 64<<20)
	upload(t, m, ref, map[string]string{"a": "a", "d/b": "b"})
	r1 := prepare(t, m, alice, ref, ReadWrite, "r1")
	r2 := prepare(t, m, alice, ref, ReadWrite, "r2")
	before := readTree(t, r2.Lower)
	mustRun(t, r1, `echo more >> a && rm d/b`)
	mustCommit(t, r1)
	if err := r1.Release(); err != nil {
		t.Fatal(err)
	}
	if _, d := treeCounts(t, m); d != 0 {
		t.Errorf("a tree another run had mounted was taken (%d derived)", d)
	}
	if after := readTree(t, r2.Lower); len(after) != len(before) {
		t.Errorf("the mounted base's tree changed: %v, was %v", after, before)
	} else {
		for p, n := range before {
			if after[p] != n {
				t.Errorf("%s in the mounted base's tree: %+v, was %+v", p, after[p], n)
			}
		}
	}
	// r2 commits on top of r1's version: a merge, derived from its base.
	mustRun(t, r2, `printf new > d/c && chmod 700 d`)
	if c := mustCommit(t, r2); c.Version != 3 {
		t.Fatalf("r2's commit %+v", c)
	}
	if err := r2.Release(); err != nil {
		t.Fatal(err)
	}
	built, _ := treeCounts(t, m)
	r3 := prepare(t, m, alice, ref, ReadOnly, "r3")
	if b, d := treeCounts(t, m); b != built || d != 1 {
		t.Errorf("the mount after the merged commit built %d trees (derived %d)", b-built, d)
	}
	sameTree(t, r3.Lower, coldTree(t, m, ref))
	if got := files(t, m, alice, ref, Head); got["a"] != "amore\n" || got["d/c"] != "new" || got["d/b"] != "" {
		t.Errorf("version 3 holds %v", got)
	}
}

// An API write derives the next version's tree too when the node has the
// current one and no run uses it; a server that stopped halfway through a
// derivation removes what it left when it starts again.
func TestWriteWarmsTheNextVersion(t *testing.T) {
	uid, gid := sandboxIDs()
	dir := t.TempDir()
	m, err := OpenLocal(Config{Dir: dir, UID: uid, GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 64<<20)
	upload(t, m, ref, map[string]string{"a": "a", "d/b": "b"})
	mt, err := m.Prepare(ctx, alice, ref, ReadOnly, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := mt.Release(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, m, alice, ref, "d/c", "c")
	built, _ := treeCounts(t, m)
	mt, err = m.Prepare(ctx, alice, ref, ReadOnly, "r2")
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Release()
	if b, d := treeCounts(t, m); b != built || d != 1 {
		t.Errorf("the mount after a write built %d trees (derived %d)", b-built, d)
	}
	sameTree(t, mt.Lower, coldTree(t, m, ref))

	// A half-derived tree (read-only folders and all) left by a stopped
	// server goes at the next start.
	half := filepath.Join(dir, "trees", ".build-stopped")
	if err := os.MkdirAll(filepath.Join(half, "ro", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(half, "ro"), 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLocal(Config{Dir: dir, UID: uid, GID: gid}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(half); !os.IsNotExist(err) {
		t.Errorf("the half-derived tree is still there: %v", err)
	}
}

// In a fleet, a run's commit on node 1 that merges in a file node 2
// committed meanwhile derives node 1's tree of the merged version,
// fetching that file; node 2, which never had the base's tree, builds the
// new version's at its first mount from what it fetches, as before.
func TestFleetCommitWarmsTheMergedVersion(t *testing.T) {
	requireRoot(t)
	fleet := startStore(t)
	n1, _ := openNode(t, fleet, nil)
	n2, fetch2 := openNode(t, fleet, nil)
	ref := Ref{Name: "w"}
	mustCreate(t, n1, alice, "w", 64<<20)
	mustWrite(t, n1, alice, ref, "a", "a")
	mt := prepare(t, n1, alice, ref, ReadWrite, "r1")
	mustWrite(t, n2, alice, ref, "from-node-2", "two") // version 2, while the run goes
	if err := os.WriteFile(filepath.Join(mt.Upper, "from-the-run"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := mustCommit(t, mt); c.Version != 3 {
		t.Fatalf("the run's commit %+v", c)
	}
	if err := mt.Release(); err != nil {
		t.Fatal(err)
	}
	built, _ := treeCounts(t, n1)
	next := prepare(t, n1, alice, ref, ReadOnly, "r2")
	if b, d := treeCounts(t, n1); b != built || d != 1 {
		t.Errorf("node 1's mount after its commit built %d trees (derived %d)", b-built, d)
	}
	sameTree(t, next.Lower, coldTree(t, n1, ref))
	if b, err := os.ReadFile(filepath.Join(next.Lower, "from-node-2")); err != nil || string(b) != "two" {
		t.Errorf("node 2's file in node 1's derived tree: %q, %v", b, err)
	}
	gets := fetch2.gets.Load()
	other := prepare(t, n2, alice, ref, ReadOnly, "r3")
	if b, d := treeCounts(t, n2); b != 1 || d != 0 {
		t.Errorf("node 2 built %d trees and derived %d", b, d)
	}
	if fetch2.gets.Load() == gets {
		t.Error("node 2 fetched nothing for the run's version")
	}
	sameTree(t, other.Lower, coldTree(t, n2, ref))
}
