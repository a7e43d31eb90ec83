package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

func TestTarKeepsRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "data", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "data", "deep", "x.csv"), []byte("a,b\n1,2\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	// What a user's code may plant: links out of the workspace, a pipe that
	// would block a reader, a link to a file inside.
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	must(os.Symlink("notes.txt", filepath.Join(dir, "alias")))
	must(os.Link(filepath.Join(dir, "notes.txt"), filepath.Join(dir, "hard")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	root, err := os.OpenRoot(dir)
	must(err)
	defer root.Close()
	var buf bytes.Buffer
	must(Tar(&buf, root, 1<<20))
	files, err := Untar(&buf, UntarLimits{MaxFiles: 10, MaxBytes: 1 << 20})
	must(err)
	got := map[string]File{}
	var names []string
	for _, f := range files {
		got[f.Path] = f
		names = append(names, f.Path)
	}
	slices.Sort(names)
	if want := []string{"data/deep/x.csv", "hard", "notes.txt", "run.sh"}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	if string(got["notes.txt"].Data) != "hello" || got["notes.txt"].Mode != 0o600 || got["run.sh"].Mode != 0o755 ||
		string(got["data/deep/x.csv"].Data) != "a,b\n1,2\n" {
		t.Errorf("contents or modes changed: %+v", got)
	}
	var small bytes.Buffer
	if err := Tar(&small, root, 10); !errors.Is(err, ErrWorkspace) {
		t.Errorf("a workspace over the cap: %v", err)
	}
}

// TestTarRefusesWhatARestoreWould: a file deeper than a restore writes
// makes the save fail, rather than a snapshot no restore can load.
func TestTarRefusesWhatARestoreWould(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(append([]string{dir}, slices.Repeat([]string{"d"}, sandbox.MaxPathDepth)...)...)
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "f.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	if err := Tar(&buf, root, 1<<20); !errors.Is(err, ErrWorkspace) || !strings.Contains(err.Error(), "could not be restored") {
		t.Errorf("a file %d directories deep: %v, want ErrWorkspace", sandbox.MaxPathDepth, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, strings.Repeat("n", sandbox.MaxNameBytes)), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := Tar(&buf, root, 1<<20); err != nil {
		t.Errorf("a name at the limit: %v", err)
	}
}

func TestUntarRefuses(t *testing.T) {
	entry := func(h tar.Header, data string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		h.Size = int64(len(data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte(data))
		}
		_ = tw.Close()
		return b.Bytes()
	}
	lim := UntarLimits{MaxFiles: 2, MaxBytes: 10}
	for name, raw := range map[string][]byte{
		"a symbolic link":  entry(tar.Header{Typeflag: tar.TypeSymlink, Name: "x", Linkname: "/etc/shadow"}, ""),
		"a hard link":      entry(tar.Header{Typeflag: tar.TypeLink, Name: "x", Linkname: "/etc/shadow"}, ""),
		"a device":         entry(tar.Header{Typeflag: tar.TypeChar, Name: "mem", Devmajor: 1, Devminor: 1}, ""),
		"a fifo":           entry(tar.Header{Typeflag: tar.TypeFifo, Name: "p"}, ""),
		"an absolute path": entry(tar.Header{Typeflag: tar.TypeReg, Name: "/etc/cron.d/x", Mode: 0o644}, "x"),
		"dot dot":          entry(tar.Header{Typeflag: tar.TypeReg, Name: "../../x", Mode: 0o644}, "x"),
		"too large":        entry(tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o644}, "0123456789a"),
		"not a tar":        []byte("garbage garbage garbage"),
	} {
		if files, err := Untar(bytes.NewReader(raw), lim); !errors.Is(err, ErrWorkspace) || files != nil {
			t.Errorf("%s: %v, %v", name, files, err)
		}
	}
}
