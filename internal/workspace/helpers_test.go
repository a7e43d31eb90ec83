package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	alice = Caller{Name: "alice"}
	bob   = Caller{Name: "bob"}
	ops   = Caller{Name: "ops", Admin: true}
)

// sandboxIDs are the owner of tree files: the jail's default user when
// the tests run as root, else whoever runs them.
func sandboxIDs() (int, int) {
	if os.Geteuid() == 0 {
		return 65534, 65534
	}
	return -1, -1
}

func newLocal(t *testing.T, lim Limits) *Manager {
	t.Helper()
	uid, gid := sandboxIDs()
	m, err := OpenLocal(Config{Dir: t.TempDir(), UID: uid, GID: gid, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustCreate(t *testing.T, m *Manager, c Caller, name string, quota int64) {
	t.Helper()
	if _, err := m.Create(context.Background(), c, name, quota); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, m *Manager, c Caller, ref Ref, p, data string) Commit {
	t.Helper()
	cm, err := m.WriteFile(context.Background(), c, ref, p, strings.NewReader(data), 0, 1<<30)
	if err != nil {
		t.Fatalf("writing %s: %v", p, err)
	}
	return cm
}

func readFile(t *testing.T, m *Manager, c Caller, ref Ref, n int64, p string) string {
	t.Helper()
	rc, _, err := m.Open(context.Background(), c, ref, n, p)
	if err != nil {
		t.Fatalf("opening %s: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// files maps every file of a version to its content, links to "->target"
// and directories to "/".
func files(t *testing.T, m *Manager, c Caller, ref Ref, n int64) map[string]string {
	t.Helper()
	list, err := m.Files(context.Background(), c, ref, n, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range list {
		switch f.Type {
		case "dir":
			out[f.Path] = "/"
		case "symlink":
			out[f.Path] = "->" + f.Target
		default:
			out[f.Path] = readFile(t, m, c, ref, n, f.Path)
		}
	}
	return out
}

type tarEntry struct {
	name, body string
	typ        byte
	mode       int64
	size       int64 // header size when not len(body)
	link       string
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		size := int64(len(e.body))
		if e.size != 0 {
			size = e.size
		}
		if typ != tar.TypeReg {
			size = 0
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Size: size, Mode: mode, Linkname: e.link,
			ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg && e.size == 0 {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A short body (size set beyond the data) is left unfinished on purpose.
	if err := tw.Close(); err != nil && !errors.Is(err, tar.ErrWriteTooLong) && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dirBytes is what the regular files under dir take (apparent sizes) and
// how many there are. A file removed while it is walked (a collector at
// work) counts for nothing.
func dirBytes(t *testing.T, dir string) (int64, int) {
	t.Helper()
	var total int64
	var n int
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		total += fi.Size()
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, n
}

var bigLimits = UploadLimits{MaxFiles: 20_000, MaxFileBytes: 1 << 30, MaxTotalBytes: 2 << 30, MaxTarBytes: 2 << 30}
