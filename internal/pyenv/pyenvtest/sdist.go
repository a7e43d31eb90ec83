package pyenvtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Sdist describes a tiny source distribution whose in-tree build backend
// (backend.py, no build requirements) zips its files into a wheel, so
// building it needs nothing from an index.
type Sdist struct {
	Name    string            // distribution name
	Version string            // e.g. "1.0"
	Files   map[string]string // path in the source tree → content, e.g. "mod/__init__.py"
	// BuildHook is Python code run first in build_wheel (written
	// unindented; it is indented into the function).
	BuildHook string
}

// Filename is the sdist's file name.
func (s Sdist) Filename() string { return fmt.Sprintf("%s-%s.tar.gz", distPart(s.Name), s.Version) }

const backendPy = `import os, tarfile, zipfile

NAME, VERSION = %q, %q
DIST = NAME.replace("-", "_").replace(".", "_")
OWN = ("pyproject.toml", "backend.py", "PKG-INFO")


def _files():
    out = []
    for root, dirs, files in os.walk("."):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for f in files:
            p = os.path.relpath(os.path.join(root, f), ".")
            if p not in OWN:
                out.append(p)
    return sorted(out)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
%s
    name = f"{DIST}-{VERSION}-py3-none-any.whl"
    info = f"{DIST}-{VERSION}.dist-info/"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p in _files():
            z.write(p, p)
            record.append(p + ",,")
        z.writestr(info + "METADATA", f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n")
        z.writestr(info + "WHEEL", "Wheel-Version: 1.0\nGenerator: pyexec-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        record += [info + "METADATA,,", info + "WHEEL,,", info + "RECORD,,"]
        z.writestr(info + "RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    name = f"{DIST}-{VERSION}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for p in _files() + list(OWN):
            t.add(p, f"{DIST}-{VERSION}/{p}")
    return name
`

// Bytes builds the sdist: a gzipped tar of the files, pyproject.toml,
// backend.py and PKG-INFO under name-version/.
func (s Sdist) Bytes() ([]byte, error) {
	hook := "    pass"
	if s.BuildHook != "" {
		lines := strings.Split(strings.TrimRight(s.BuildHook, "\n"), "\n")
		for i, l := range lines {
			lines[i] = "    " + l
		}
		hook = strings.Join(lines, "\n")
	}
	files := map[string]string{
		"pyproject.toml": fmt.Sprintf("[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n\n[project]\nname = %q\nversion = %q\n", s.Name, s.Version),
		"backend.py":     fmt.Sprintf(backendPy, s.Name, s.Version, hook),
		"PKG-INFO":       fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", s.Name, s.Version),
	}
	for k, v := range s.Files {
		files[k] = v
	}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	prefix := distPart(s.Name) + "-" + s.Version + "/"
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: prefix + n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// AddSdist serves s from the index next to its wheels.
func (ix *Index) AddSdist(t testing.TB, s Sdist) {
	t.Helper()
	b, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := normalize(s.Name)
	ix.projects[n] = append(ix.projects[n], s.Filename())
	ix.files[s.Filename()] = b
}
