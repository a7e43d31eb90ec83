package client

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTarFromMap(t *testing.T) {
	files := map[string]string{"main.py": "print(1)\n", "pkg/mod.py": "", "./data/x.txt": "x"}
	a, err := TarFromMap(files)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"main.py": "print(1)\n", "pkg/mod.py": "", "data/x.txt": "x"}
	if got := tarContents(t, a); !reflect.DeepEqual(got, want) {
		t.Errorf("contents = %v, want %v", got, want)
	}
	b, err := TarFromMap(files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same map gave two different archives")
	}
	long := strings.Repeat("d/", 80) + "main.py" // beyond USTAR's 256 bytes: needs PAX
	if got := tarContents(t, mustTar(t, map[string]string{long: "ok"})); got[long] != "ok" {
		t.Errorf("long name lost: %v", got)
	}
}

func mustTar(t *testing.T, m map[string]string) []byte {
	t.Helper()
	b, err := TarFromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTarRejectsUnsafeNames(t *testing.T) {
	for _, name := range []string{"", "/etc/passwd", "../x.py", "a/../../x.py", "..", ".", `\abs.py`} {
		t.Run(name, func(t *testing.T) {
			if _, err := TarFromMap(map[string]string{name: "x"}); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("TarFromMap(%q) err = %v, want ErrUnsafePath", name, err)
			}
		})
	}
}

func TestTarFromFiles(t *testing.T) {
	dir := writeTree(t, map[string]string{"src/main.py": "m", "lib/util.py": "u", "other/main.py": "dup"})
	t.Run("base names", func(t *testing.T) {
		b, err := TarFromFiles([]string{filepath.Join(dir, "src/main.py"), filepath.Join(dir, "lib/util.py")})
		if err != nil {
			t.Fatal(err)
		}
		if got := tarContents(t, b); !reflect.DeepEqual(got, map[string]string{"main.py": "m", "util.py": "u"}) {
			t.Errorf("contents = %v", got)
		}
	})
	t.Run("same base name twice", func(t *testing.T) {
		_, err := TarFromFiles([]string{filepath.Join(dir, "src/main.py"), filepath.Join(dir, "other/main.py")})
		if err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("err = %v, want a duplicate-name error", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := TarFromFiles([]string{filepath.Join(dir, "nope.py")}); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want ErrNotExist", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		if _, err := TarFromFiles([]string{dir}); err == nil {
			t.Error("a directory was accepted as a file")
		}
	})
}

func TestTarFromDirectory(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"main.py": "m", "pkg/__init__.py": "", "pkg/util.py": "u",
		".git/config": "secret", "pkg/__pycache__/util.cpython-312.pyc": "bytecode", ".env": "A=1",
	})
	b, err := TarFromDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"main.py": "m", "pkg/__init__.py": "", "pkg/util.py": "u", ".env": "A=1"}
	if got := tarContents(t, b); !reflect.DeepEqual(got, want) {
		t.Errorf("contents = %v, want %v", got, want)
	}

	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := TarFromDirectory(dir); err == nil || !strings.Contains(err.Error(), "link.py") {
		t.Errorf("err = %v, want an error naming the symbolic link", err)
	}
	if _, err := TarFromDirectory(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func TestTarFromReader(t *testing.T) {
	b, err := TarFromReader(strings.NewReader("print('stdin')\n"), "main.py")
	if err != nil {
		t.Fatal(err)
	}
	if got := tarContents(t, b); !reflect.DeepEqual(got, map[string]string{"main.py": "print('stdin')\n"}) {
		t.Errorf("contents = %v", got)
	}
	if _, err := TarFromReader(strings.NewReader("x"), "../main.py"); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("err = %v, want ErrUnsafePath", err)
	}
}

func TestDetectEntrypoint(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"main.py wins", map[string]string{"a.py": "", "__main__.py": "", "main.py": ""}, "main.py"},
		{"then __main__.py", map[string]string{"a.py": "", "__main__.py": ""}, "__main__.py"},
		{"then the first .py", map[string]string{"b.py": "", "a.py": "", "README.md": ""}, "a.py"},
		{"nested files count", map[string]string{"pkg/run.py": "", "data.csv": ""}, "pkg/run.py"},
		{"a nested main.py has no priority", map[string]string{"pkg/main.py": "", "a.py": ""}, "a.py"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectEntrypoint(mustTar(t, tt.files))
			if err != nil || got != tt.want {
				t.Errorf("DetectEntrypoint = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("no python file", func(t *testing.T) {
		if _, err := DetectEntrypoint(mustTar(t, map[string]string{"notes.txt": ""})); !errors.Is(err, ErrNoEntrypoint) {
			t.Errorf("err = %v, want ErrNoEntrypoint", err)
		}
	})
	t.Run("not a tar", func(t *testing.T) {
		if _, err := DetectEntrypoint([]byte(strings.Repeat("garbage!", 100))); err == nil || errors.Is(err, ErrNoEntrypoint) {
			t.Errorf("err = %v, want a read error", err)
		}
	})
}
