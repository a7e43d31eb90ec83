package detect

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
)

// scanProject scans the project's .py files as the detector reads them:
// every one the detector's walk of the workspace finds. It returns why
// the detector must read the project instead, if it must, and an error
// wrapping ErrTooComplex for code beyond what detection reads.
func scanProject(files []File, minor int) (*found, string, error) {
	byPath := map[string][]byte{}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".py") {
			continue
		}
		p := path.Clean(f.Path)
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return nil, "a file outside the workspace: " + f.Path, nil
		}
		byPath[p] = f.Data
	}
	ranks := walkRanks(files)
	order := make([]string, 0, len(ranks))
	for p := range ranks {
		order = append(order, p)
	}
	slices.SortFunc(order, func(a, b string) int { return ranks[a] - ranks[b] })
	out := &found{}
	for _, p := range order {
		unsure, tooComplex := scanFile(p, byPath[p], minor, out)
		if tooComplex != "" {
			return nil, "", fmt.Errorf("%w: %s: %s", ErrTooComplex, p, tooComplex)
		}
		if unsure != "" {
			return nil, p + ": " + unsure, nil
		}
	}
	sortFound(out.imports, out.calls, ranks)
	return out, "", nil
}

// walkRanks numbers the .py files of the project in the order detect.py's
// os.walk visits them: a directory's files by name, then its
// subdirectories by name, skipping those whose name starts with a dot and
// __pycache__.
func walkRanks(files []File) map[string]int {
	var paths []string
	seen := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		if !strings.HasSuffix(p, ".py") || seen[p] || !walked(p) {
			continue
		}
		seen[p] = true
		paths = append(paths, p)
	}
	slices.SortFunc(paths, walkOrder)
	ranks := make(map[string]int, len(paths))
	for i, p := range paths {
		ranks[p] = i
	}
	return ranks
}

// walked reports whether os.walk descends into every directory of p.
func walked(p string) bool {
	dirs := strings.Split(p, "/")
	for _, d := range dirs[:len(dirs)-1] {
		if strings.HasPrefix(d, ".") || d == "__pycache__" {
			return false
		}
	}
	return true
}

// walkOrder orders two paths as a top-down walk with sorted names meets
// them: at the first part where they differ, a file comes before a
// directory.
func walkOrder(a, b string) int {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		fileA, fileB := i == len(pa)-1, i == len(pb)-1
		if fileA != fileB {
			if fileA {
				return -1
			}
			return 1
		}
		return strings.Compare(pa[i], pb[i])
	}
	return cmp.Compare(len(pa), len(pb))
}

// sortFound puts imports and calls in the walk's order of their files,
// then by line and name: the order of both the scan and the detector, so
// that their answers compare equal and policy names the same place first.
func sortFound(imports []Import, calls []Call, ranks map[string]int) {
	rank := func(f string) int {
		if r, ok := ranks[f]; ok {
			return r
		}
		return math.MaxInt
	}
	slices.SortStableFunc(imports, func(a, b Import) int {
		return cmp.Or(cmp.Compare(rank(a.File), rank(b.File)), strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			strings.Compare(a.Module, b.Module), boolOrder(a.Optional, b.Optional))
	})
	slices.SortStableFunc(calls, func(a, b Call) int {
		return cmp.Or(cmp.Compare(rank(a.File), rank(b.File)), strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			strings.Compare(a.Name, b.Name))
	})
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// thirdParty keeps the imports outside the standard library (skip) and
// the project's own modules.
func thirdParty(imports []Import, skip, project map[string]bool) []Import {
	var out []Import
	for _, im := range imports {
		top, _, _ := strings.Cut(im.Module, ".")
		if skip[top] || project[top] || top == "" {
			continue
		}
		out = append(out, im)
	}
	return out
}

// projectModules returns the top-level module and package names that the
// project's files provide, relative to the workspace and to the directory
// of the entry point.
func projectModules(files []File, entry string) map[string]bool {
	roots := []string{"."}
	if d := path.Dir(path.Clean(entry)); d != "." {
		roots = append(roots, d)
	}
	names := map[string]bool{}
	for _, f := range files {
		p := path.Clean(f.Path)
		for _, r := range roots {
			rel := p
			if r != "." {
				var ok bool
				if rel, ok = strings.CutPrefix(p, r+"/"); !ok {
					continue
				}
			}
			first, _, isDir := strings.Cut(rel, "/")
			switch {
			case isDir:
				names[first] = true // a package, or a namespace package
			case strings.HasSuffix(first, ".py"), strings.HasSuffix(first, ".so"), strings.HasSuffix(first, ".pyc"):
				stem, _, _ := strings.Cut(first, ".")
				names[stem] = true
			}
		}
	}
	return names
}
