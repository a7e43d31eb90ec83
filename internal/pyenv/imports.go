package pyenv

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
)

// importTable is the curated import → distribution table.
//
//go:embed imports.txt
var importTable string

// ImportMap maps import names to the distributions that provide them.
// The curated table covers the common cases where the two differ
// (PIL → pillow, cv2 → opencv-python-headless, yaml → pyyaml); operators
// extend or override it. An import with no entry is looked up as a
// distribution of the same name.
type ImportMap struct {
	m map[string]string // dotted import name → normalised distribution
}

// DefaultImportMap returns the curated table.
func DefaultImportMap() *ImportMap {
	m, err := ParseImportMap(importTable)
	if err != nil {
		panic(fmt.Sprintf("pyenv: the embedded import table is malformed: %v", err)) // caught by the package tests
	}
	return m
}

// ParseImportMap reads "import distribution" pairs, one per line, with '#'
// comments. A dotted import ("google.protobuf") covers its submodules.
func ParseImportMap(text string) (*ImportMap, error) {
	m := &ImportMap{m: map[string]string{}}
	for i, line := range strings.Split(text, "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case len(f) != 2:
			return nil, fmt.Errorf("import map line %d: want \"import distribution\", got %q", i+1, strings.TrimSpace(line))
		}
		if _, dup := m.m[f[0]]; dup {
			return nil, fmt.Errorf("import map line %d: %s is listed twice", i+1, f[0])
		}
		r, err := ParseRequirement(f[1], FromDetection)
		if err != nil || r.Spec != r.Name {
			return nil, fmt.Errorf("import map line %d: %q is not a distribution name", i+1, f[1])
		}
		m.m[f[0]] = r.Name
	}
	return m, nil
}

// With returns a copy of m with extra's entries added, replacing entries
// of the same import name.
func (m *ImportMap) With(extra *ImportMap) *ImportMap {
	out := &ImportMap{m: make(map[string]string, len(m.m)+len(extra.m))}
	for k, v := range m.m {
		out.m[k] = v
	}
	for k, v := range extra.m {
		out.m[k] = v
	}
	return out
}

// Len returns the number of entries.
func (m *ImportMap) Len() int { return len(m.m) }

// Distribution returns the distribution that provides the dotted module
// name: the entry of the longest listed prefix, else the top-level name
// normalised. It reports false for names that cannot be distributions
// (private modules such as "_speedups").
func (m *ImportMap) Distribution(module string) (string, bool) {
	for name := module; name != ""; {
		if d, ok := m.m[name]; ok {
			return d, true
		}
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	top, _, _ := strings.Cut(module, ".")
	if top == "" || strings.HasPrefix(top, "_") || !namePattern.MatchString(top) || namePattern.FindString(top) != top {
		return "", false
	}
	return NormalizeName(top), true
}

// Requirements maps detected third-party imports to distributions. A
// distribution is optional only if every import that needs it is optional.
func (m *ImportMap) Requirements(imports []detect.Import) []Requirement {
	byName := map[string]*Requirement{}
	var order []string
	for _, im := range imports {
		d, ok := m.Distribution(im.Module)
		if !ok {
			continue
		}
		if r, seen := byName[d]; seen {
			r.Optional = r.Optional && im.Optional
			continue
		}
		byName[d] = &Requirement{Name: d, Spec: d, Optional: im.Optional, Source: FromDetection}
		order = append(order, d)
	}
	out := make([]Requirement, len(order))
	for i, d := range order {
		out[i] = *byName[d]
	}
	return out
}
