package interp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pyenvVersions are the interpreters this machine is documented to have.
var pyenvVersions = []string{"3.10", "3.11", "3.12", "3.13"}

func requirePyenv(t *testing.T) {
	t.Helper()
	for _, v := range pyenvVersions {
		if m, _ := filepath.Glob("/root/.pyenv/versions/" + v + ".*/bin/python3"); len(m) == 0 {
			t.Skipf("pyenv Python %s is not installed under /root/.pyenv", v)
		}
	}
}

func TestDiscoverThisMachine(t *testing.T) {
	requirePyenv(t)
	opts := OptionsFromEnv(os.Getenv)
	opts.Pythons, opts.Default = "", ""
	s, err := Discover(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	versions := s.Versions()
	for _, v := range pyenvVersions {
		if !slices.Contains(versions, v) {
			t.Errorf("version %s not discovered; found %v", v, versions)
		}
	}
	for _, in := range s.All() {
		t.Run(in.Version, func(t *testing.T) {
			if !strings.HasPrefix(in.Full, in.Version+".") {
				t.Errorf("full version %q does not extend %q", in.Full, in.Version)
			}
			if real, err := filepath.EvalSymlinks(in.Path); err != nil || real != in.Path {
				t.Errorf("path %s is not fully resolved (%s, %v)", in.Path, real, err)
			}
			if strings.Contains(in.Path, "/shims/") {
				t.Errorf("path %s is a pyenv shim", in.Path)
			}
			if v, _ := parseMinor(in.Version); v.less(minor{3, 8}) {
				t.Errorf("version %s is older than 3.8", in.Version)
			}
			if strings.HasPrefix(in.Path, "/root/.pyenv/versions/") {
				prefix := filepath.Dir(filepath.Dir(in.Path))
				if !slices.Equal(in.Mounts, []string{prefix}) {
					t.Errorf("mounts %v, want exactly the pyenv prefix %s", in.Mounts, prefix)
				}
			}
			if strings.HasPrefix(in.Path, "/usr/") && len(in.Mounts) != 0 {
				t.Errorf("mounts %v for an interpreter under /usr, which every jail has", in.Mounts)
			}
		})
	}
	if got, want := s.Default().Version, versions[len(versions)-1]; got != want {
		t.Errorf("default %s, want the newest, %s", got, want)
	}
}

// fakeShim writes a pyenv-style shell shim named python3 into a new directory.
func fakeShim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	shim := "#!/usr/bin/env bash\nexec /usr/bin/python3 \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDiscoverSkipsShimsAndPicksBest(t *testing.T) {
	requirePyenv(t)
	shims := fakeShim(t)
	// An older 3.11 reached through a symlink and a newer one from pyenv.
	links := t.TempDir()
	sys311, err := filepath.EvalSymlinks("/usr/bin/python3.11")
	if err != nil {
		t.Skip("no /usr/bin/python3.11 to compare against pyenv's 3.11")
	}
	if err := os.Symlink(sys311, filepath.Join(links, "python3.11")); err != nil {
		t.Fatal(err)
	}
	s, err := Discover(context.Background(), Options{
		PathDirs: []string{shims, links},
		Globs:    []string{"/root/.pyenv/versions/3.1*/bin/python3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range s.All() {
		if strings.HasPrefix(in.Path, shims) {
			t.Errorf("shim %s offered as an interpreter", in.Path)
		}
	}
	in, err := s.Lookup("3.11")
	if err != nil {
		t.Fatal(err)
	}
	want := sys311
	pyenv311, _ := filepath.Glob("/root/.pyenv/versions/3.11.*/bin/python3.11")
	if patchLevel(probeFull(t, pyenv311[0])) > patchLevel(probeFull(t, sys311)) {
		want = pyenv311[0]
	}
	if in.Path != want {
		t.Errorf("3.11 is %s (%s), want %s, the highest patch level", in.Path, in.Full, want)
	}
}

func probeFull(t *testing.T, path string) string {
	t.Helper()
	in, _, err := probe(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in.Full
}

func TestDiscoverPinned(t *testing.T) {
	requirePyenv(t)
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs the system's /usr/bin/python3.11")
	}
	py312, _ := filepath.Glob("/root/.pyenv/versions/3.12.*/bin/python3")
	py313, _ := filepath.Glob("/root/.pyenv/versions/3.13.*/bin/python3")
	shims := fakeShim(t)
	cases := []struct {
		name     string
		opts     Options
		wantErr  string
		wantPath map[string]string // version → resolved path prefix
		wantDef  string
	}{
		{name: "pin wins over a higher patch level found by discovery",
			opts: Options{Pythons: "3.11=/usr/bin/python3.11", Default: "3.11",
				Globs: []string{"/root/.pyenv/versions/3.11*/bin/python3", "/root/.pyenv/versions/3.13*/bin/python3"}},
			wantPath: map[string]string{"3.11": "/usr/bin/python3.11", "3.13": "/root/.pyenv/versions/3.13"},
			wantDef:  "3.11"},
		{name: "pins alone", opts: Options{Pythons: " 3.13=" + py313[0] + " , "},
			wantPath: map[string]string{"3.13": "/root/.pyenv/versions/3.13"}, wantDef: "3.13"},
		{name: "pinned version does not match the binary",
			opts:    Options{Pythons: "3.11=" + py312[0]},
			wantErr: "PYEXEC_PYTHONS: 3.11=" + py312[0] + ": the interpreter is Python 3.12"},
		{name: "pinned path missing", opts: Options{Pythons: "3.12=/nonexistent/python3"},
			wantErr: "PYEXEC_PYTHONS: 3.12=/nonexistent/python3: lstat /nonexistent: no such file or directory"},
		{name: "pinned shim", opts: Options{Pythons: "3.12=" + filepath.Join(shims, "python3")},
			wantErr: "not an ELF executable"},
		{name: "default not available",
			opts:    Options{Pythons: "3.13=" + py313[0], Default: "3.9"},
			wantErr: `default python version: unsupported python_version "3.9"; supported versions: 3.13`},
		{name: "nothing found", opts: Options{PathDirs: []string{shims}}, wantErr: ErrNoInterpreter.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Discover(context.Background(), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Versions()) != len(tc.wantPath) {
				t.Errorf("versions %v, want %d", s.Versions(), len(tc.wantPath))
			}
			for v, prefix := range tc.wantPath {
				in, err := s.Lookup(v)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(in.Path, prefix) {
					t.Errorf("%s is %s, want one under %s", v, in.Path, prefix)
				}
			}
			if got := s.Default().Version; got != tc.wantDef {
				t.Errorf("default %s, want %s", got, tc.wantDef)
			}
		})
	}
}

func TestDiscoverCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Discover(ctx, Options{Globs: []string{"/root/.pyenv/versions/*/bin/python3", "/usr/bin/python3"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}
