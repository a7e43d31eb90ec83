package interp

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyPython copies /usr/bin/python3.11 (a binary with libpython inside,
// which finds its standard library from its compiled-in prefix wherever
// it lies) into a new directory, so that a test may change it.
func copyPython(t *testing.T) (dir, path string) {
	t.Helper()
	src, err := filepath.EvalSymlinks("/usr/bin/python3.11")
	if err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dir = t.TempDir()
	path = filepath.Join(dir, "python3.11")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// discoverIn runs Discover over dir alone with cache as its cache file and
// returns the one interpreter it offers.
func discoverIn(t *testing.T, dir, cache string) Interpreter {
	t.Helper()
	s, err := Discover(context.Background(), Options{PathDirs: []string{dir}, CacheFile: cache})
	if err != nil {
		t.Fatal(err)
	}
	all := s.All()
	if len(all) != 1 {
		t.Fatalf("Discover offered %v, want the one interpreter in %s", all, dir)
	}
	return all[0]
}

// readCache reads the cache file as Discover wrote it.
func readCache(t *testing.T, path string) cacheFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// forge rewrites the cache's answer for binary to claim Python 3.99.1, with
// the identities of its files as they are now: a Discover that offers 3.99
// took the answer from the file instead of running the interpreter.
func forge(t *testing.T, path, binary string, mode os.FileMode) {
	t.Helper()
	f := readCache(t, path)
	e, ok := f.Answers[binary]
	if !ok {
		t.Fatalf("the cache holds no answer for %s: %v", binary, f.Answers)
	}
	e.Answer.Version, e.Answer.Minor = "3.99.1", 99
	f.Answers[binary] = e
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestProbeCacheReusesAnswersOfUnchangedInterpreters: a second Discover
// takes an interpreter's answer from the cache file while its files are
// the same, and runs it again once the binary changed.
func TestProbeCacheReusesAnswersOfUnchangedInterpreters(t *testing.T) {
	dir, py := copyPython(t)
	cache := filepath.Join(t.TempDir(), "interpreters.json")
	first := discoverIn(t, dir, cache)
	if first.Version != "3.11" {
		t.Fatalf("the copy is Python %s, want 3.11", first.Version)
	}
	st, err := os.Stat(cache)
	if err != nil {
		t.Fatalf("Discover wrote no cache: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the cache file's mode is %o, want 0600", st.Mode().Perm())
	}
	f := readCache(t, cache)
	if f.Script != scriptDigest() || len(f.Answers[py].Files) < 2 || f.Answers[py].Files[0].Path != py {
		t.Fatalf("the cache holds %+v, want the answer for %s with the files it depends on", f, py)
	}

	forge(t, cache, py, 0o600)
	if got := discoverIn(t, dir, cache); got.Version != "3.99" || got.Path != py || len(got.Mounts) != len(first.Mounts) {
		t.Fatalf("with an unchanged binary Discover found %+v, want the cached answer (3.99)", got)
	}

	// A new modification time, as a package upgrade or a rebuild gives.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(py, later, later); err != nil {
		t.Fatal(err)
	}
	if got := discoverIn(t, dir, cache); got.Version != "3.11" {
		t.Fatalf("after the binary changed Discover found %s, want 3.11 from running it", got.Version)
	}
	if f := readCache(t, cache); f.Answers[py].Answer.Minor != 11 {
		t.Errorf("the cache was not rewritten with the new answer: %+v", f.Answers[py].Answer)
	}
}

// TestProbeCacheTrustsOnlyItsOwnersFile: answers that someone else could
// have written choose what jails mount, so a cache file writable by
// others, belonging to another user, behind a symlink or from another
// probe script is ignored and every interpreter is run.
func TestProbeCacheTrustsOnlyItsOwnersFile(t *testing.T) {
	dir, py := copyPython(t)
	cases := []struct {
		name  string
		spoil func(t *testing.T, cache string) string // returns the path to give Discover
	}{
		{"writable by others", func(t *testing.T, cache string) string {
			forge(t, cache, py, 0o666)
			return cache
		}},
		{"writable by its group", func(t *testing.T, cache string) string {
			forge(t, cache, py, 0o620)
			return cache
		}},
		{"another user's", func(t *testing.T, cache string) string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the file away")
			}
			forge(t, cache, py, 0o600)
			if err := os.Chown(cache, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return cache
		}},
		{"a symlink", func(t *testing.T, cache string) string {
			forge(t, cache, py, 0o600)
			link := cache + ".link"
			if err := os.Symlink(cache, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"another probe script", func(t *testing.T, cache string) string {
			forge(t, cache, py, 0o600)
			f := readCache(t, cache)
			f.Script = "0000"
			b, _ := json.Marshal(f)
			if err := os.WriteFile(cache, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return cache
		}},
		{"not JSON", func(t *testing.T, cache string) string {
			if err := os.WriteFile(cache, []byte("{\"script\": "), 0o600); err != nil {
				t.Fatal(err)
			}
			return cache
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "interpreters.json")
			discoverIn(t, dir, cache)
			path := tc.spoil(t, cache)
			if got := discoverIn(t, dir, path); got.Version != "3.11" {
				t.Fatalf("Discover found %s, want 3.11 from running the interpreter", got.Version)
			}
		})
	}
}

// TestProbeCacheForgetsInterpretersThatAreGone: the file keeps only what
// the last Discover found, so it does not grow with every interpreter a
// host ever had.
func TestProbeCacheForgetsInterpretersThatAreGone(t *testing.T) {
	dir, py := copyPython(t)
	other := t.TempDir()
	cache := filepath.Join(t.TempDir(), "interpreters.json")
	discoverIn(t, dir, cache)
	if err := os.Rename(py, filepath.Join(other, "python3.11")); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(other, "python3.11")
	discoverIn(t, other, cache)
	f := readCache(t, cache)
	if _, ok := f.Answers[py]; ok || len(f.Answers) != 1 {
		t.Errorf("the cache holds %d answers (the old path's: %v), want only %s's", len(f.Answers), ok, moved)
	}
}

// TestProbeCacheChecksEveryFileOfAnAnswer: an answer depends on more than
// the binary (libpython, the prefixes, the standard library): a change to
// any of them, here a file standing in for a libpython, means running the
// interpreter again; and an entry whose first file is not the binary it is
// filed under is never used.
func TestProbeCacheChecksEveryFileOfAnAnswer(t *testing.T) {
	dir, py := copyPython(t)
	cache := filepath.Join(t.TempDir(), "interpreters.json")
	discoverIn(t, dir, cache)
	lib := filepath.Join(t.TempDir(), "libpython3.11.so.1.0")
	if err := os.WriteFile(lib, []byte("a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	libID, err := identify(lib)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(change func(e *cacheEntry)) {
		t.Helper()
		forge(t, cache, py, 0o600)
		f := readCache(t, cache)
		e := f.Answers[py]
		change(&e)
		f.Answers[py] = e
		b, _ := json.Marshal(f)
		if err := os.WriteFile(cache, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	rewrite(func(e *cacheEntry) { e.Files = append(e.Files, libID) })
	if got := discoverIn(t, dir, cache); got.Version != "3.99" {
		t.Fatalf("with every file unchanged Discover found %s, want the cached 3.99", got.Version)
	}
	rewrite(func(e *cacheEntry) { e.Files = append(e.Files, libID) })
	if err := os.WriteFile(lib, []byte("another library"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := discoverIn(t, dir, cache); got.Version != "3.11" {
		t.Fatalf("after the library changed Discover found %s, want 3.11 from running the interpreter", got.Version)
	}

	if libID, err = identify(lib); err != nil {
		t.Fatal(err)
	}
	rewrite(func(e *cacheEntry) { e.Files[0] = libID })
	if got := discoverIn(t, dir, cache); got.Version != "3.11" {
		t.Fatalf("an entry that does not start with its binary was used: Discover found %s, want 3.11", got.Version)
	}
}
