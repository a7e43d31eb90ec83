package interp

import (
	"fmt"
	"path/filepath"
	"strings"
)

// pinned is one operator-configured interpreter.
type pinned struct {
	version minor
	path    string
}

// parsePythons reads the PYEXEC_PYTHONS syntax: comma-separated
// VERSION=PATH entries such as "3.12=/opt/py312/bin/python3", where VERSION
// is MAJOR.MINOR and PATH is absolute. Blank entries are ignored.
func parsePythons(s string) ([]pinned, error) {
	var out []pinned
	seen := map[minor]string{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		v, path, ok := strings.Cut(entry, "=")
		v, path = strings.TrimSpace(v), strings.TrimSpace(path)
		if !ok || v == "" || path == "" {
			return nil, fmt.Errorf("python entry %q: want VERSION=PATH, e.g. 3.12=/usr/bin/python3.12", entry)
		}
		m, ok := parseMinor(v)
		if !ok || strings.Count(v, ".") != 1 {
			return nil, fmt.Errorf("python entry %q: version %q is not MAJOR.MINOR, e.g. 3.12", entry, v)
		}
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("python entry %q: path %q is not absolute", entry, path)
		}
		if prev, dup := seen[m]; dup {
			return nil, fmt.Errorf("python entry %q: version %s is already set to %s", entry, m, prev)
		}
		seen[m] = path
		out = append(out, pinned{version: m, path: filepath.Clean(path)})
	}
	return out, nil
}
