package interp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOptionsFromEnv(t *testing.T) {
	env := map[string]string{
		"PATH":                  "/opt/bin:relative/bin::/usr/bin",
		"HOME":                  "/home/u",
		"PYENV_ROOT":            "/srv/pyenv",
		"UV_PYTHON_INSTALL_DIR": "/srv/uv",
		"PYEXEC_PYTHONS":        "3.12=/opt/py312/bin/python3",
		"PYEXEC_DEFAULT_PYTHON": "3.12",
	}
	opts := OptionsFromEnv(func(k string) string { return env[k] })
	if opts.Pythons != env["PYEXEC_PYTHONS"] || opts.Default != "3.12" {
		t.Errorf("pythons %q default %q", opts.Pythons, opts.Default)
	}
	if want := []string{"/opt/bin", "/usr/bin"}; !slices.Equal(opts.PathDirs, want) {
		t.Errorf("path dirs %v, want %v (relative entries dropped)", opts.PathDirs, want)
	}
	for _, g := range []string{
		"/usr/local/bin/python3.*", "/usr/bin/python3.*",
		"/srv/pyenv/versions/*/bin/python3", "/home/u/.pyenv/versions/*/bin/python3", "/root/.pyenv/versions/*/bin/python3",
		"/srv/uv/*/bin/python3", "/home/u/.local/share/uv/python/*/bin/python3",
	} {
		if !slices.Contains(opts.Globs, g) {
			t.Errorf("globs %v lack %s", opts.Globs, g)
		}
	}
}

func TestMountsFor(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := mk("py", 0o755)
	bin := mk("py/bin", 0o755)
	stdlib := mk("py/lib/python3.12", 0o755)
	libdir := mk("shared/lib", 0o755)
	private := mk("private", 0o700)
	cases := []struct {
		name    string
		binary  string // empty means prefix/bin/python3.12
		r       probeResult
		want    []string
		wantErr string
	}{
		{name: "system interpreter needs nothing", binary: "/usr/bin/python3.11",
			r: probeResult{Prefixes: []string{"/usr", "/usr"}, Stdlib: []string{"/usr/lib/python3.11"}}},
		{name: "prefix covers its bin and stdlib",
			r:    probeResult{Prefixes: []string{prefix, prefix, prefix, prefix}, Stdlib: []string{stdlib, stdlib}},
			want: []string{prefix}},
		{name: "libpython outside the prefix",
			r: probeResult{Prefixes: []string{prefix}, Stdlib: []string{stdlib},
				Libs: []string{filepath.Join(libdir, "libpython3.12.so.1.0")}},
			want: []string{prefix, libdir}},
		{name: "missing exec prefix is ignored",
			r:    probeResult{Prefixes: []string{prefix, filepath.Join(root, "gone")}},
			want: []string{prefix}},
		{name: "directory the payload user cannot enter",
			r:       probeResult{Prefixes: []string{prefix, private}},
			wantErr: "is not readable by the unprivileged payload user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			binary := tc.binary
			if binary == "" {
				binary = filepath.Join(bin, "python3.12")
			}
			got, err := mountsFor(binary, tc.r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("mounts %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsPythonName(t *testing.T) {
	for name, want := range map[string]bool{
		"python3": true, "python3.12": true, "python3.9": true,
		"python3.12-config": false, "python3.13t": false, "python": false, "python3.": false, "python2.7": false,
	} {
		t.Run(name, func(t *testing.T) {
			if got := isPythonName(name); got != want {
				t.Errorf("isPythonName(%q) = %v, want %v", name, got, want)
			}
		})
	}
}
