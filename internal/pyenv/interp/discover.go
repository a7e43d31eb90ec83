package interp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// probeParallelism bounds how many interpreters are probed at once.
const probeParallelism = 4

// Options say where Discover looks. OptionsFromEnv fills them the usual way.
type Options struct {
	// Pythons pins interpreters by version in PYEXEC_PYTHONS syntax:
	// "3.12=/opt/py312/bin/python3,3.11=/usr/bin/python3.11". A pinned
	// interpreter replaces any discovered one of its version; it must run
	// and report the version it is pinned to, or Discover fails.
	Pythons string
	// Default is the version used when a request names none; empty means
	// the newest available. It must be available, or Discover fails.
	Default string
	// Preferred is the default when Default is empty and an interpreter of
	// that version was found; otherwise the newest one is.
	Preferred string
	// PathDirs are searched for python3 and python3.N (the directories of $PATH).
	PathDirs []string
	// Globs are further patterns of interpreter binaries, searched in order
	// after PathDirs, e.g. "/root/.pyenv/versions/*/bin/python3".
	Globs []string
	// CacheFile, if set, keeps each interpreter's probe answer from one
	// Discover to the next (a server's restart): an interpreter none of
	// whose files changed is not run again (see probeCache).
	CacheFile string
	// Logger receives one line per candidate that is skipped, with the
	// reason; nil discards them.
	Logger *slog.Logger
}

// OptionsFromEnv returns the standard search: $PYEXEC_PYTHONS,
// $PYEXEC_DEFAULT_PYTHON, the directories of $PATH, /usr/local/bin and
// /usr/bin, pyenv's versions ($PYENV_ROOT, ~/.pyenv, /root/.pyenv) and uv's
// managed interpreters ($UV_PYTHON_INSTALL_DIR, ~/.local/share/uv/python).
func OptionsFromEnv(getenv func(string) string) Options {
	opts := Options{
		Pythons: getenv("PYEXEC_PYTHONS"),
		Default: getenv("PYEXEC_DEFAULT_PYTHON"),
	}
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if filepath.IsAbs(d) { // a relative PATH entry depends on the cwd: ignore it
			opts.PathDirs = append(opts.PathDirs, d)
		}
	}
	opts.Globs = []string{"/usr/local/bin/python3.*", "/usr/bin/python3.*"}
	home := getenv("HOME")
	var pyenvRoots []string
	if r := getenv("PYENV_ROOT"); r != "" {
		pyenvRoots = append(pyenvRoots, r)
	}
	if home != "" {
		pyenvRoots = append(pyenvRoots, filepath.Join(home, ".pyenv"))
	}
	pyenvRoots = append(pyenvRoots, "/root/.pyenv")
	for _, r := range pyenvRoots {
		opts.Globs = append(opts.Globs, filepath.Join(r, "versions", "*", "bin", "python3"))
	}
	if d := getenv("UV_PYTHON_INSTALL_DIR"); d != "" {
		opts.Globs = append(opts.Globs, filepath.Join(d, "*", "bin", "python3"))
	}
	if home != "" {
		opts.Globs = append(opts.Globs, filepath.Join(home, ".local", "share", "uv", "python", "*", "bin", "python3"))
	}
	return opts
}

// isPythonName reports whether name is python3 or python3.N, the names
// looked for in PathDirs and kept from Globs (never python3.N-config or
// python3.Nt).
func isPythonName(name string) bool {
	rest, ok := strings.CutPrefix(name, "python3")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	n, ok := strings.CutPrefix(rest, ".")
	_, isNum := number(n)
	return ok && isNum
}

// Discover finds the usable interpreters: CPython 3.8 or newer, final
// releases, with the GIL (free-threaded builds need their own wheels), one
// per minor version. Among discovered interpreters of one minor version the
// highest patch level wins, then the first found. Pinned interpreters
// (Options.Pythons) win over discovered ones. Candidates that cannot be
// used are skipped with a log line; a pinned one that cannot be used, or a
// Default that is unavailable, is an error.
func Discover(ctx context.Context, opts Options) (*Interpreters, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pins, err := parsePythons(opts.Pythons)
	if err != nil {
		return nil, fmt.Errorf("PYEXEC_PYTHONS: %w", err)
	}
	cache, err := openCache(opts.CacheFile)
	if err != nil {
		log.Info("not using the interpreters' cache: probing them all", "reason", err)
	}
	chosen := map[string]Interpreter{}
	for _, p := range pins {
		in, err := probePinned(ctx, p, cache)
		if err != nil {
			return nil, fmt.Errorf("PYEXEC_PYTHONS: %w", err)
		}
		chosen[in.Version] = in
	}

	found := probeAll(ctx, candidates(opts), cache, log)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("discovering interpreters: %w", err)
	}
	if err := cache.save(); err != nil {
		log.Info("the interpreters' cache was not written: the next start probes them again", "reason", err)
	}
	best := map[string]candidate{}
	for _, c := range found {
		if _, pinned := chosen[c.in.Version]; pinned {
			continue
		}
		if b, ok := best[c.in.Version]; !ok || c.micro > b.micro {
			best[c.in.Version] = c
		}
	}
	for v, c := range best {
		chosen[v] = c.in
	}
	list := make([]Interpreter, 0, len(chosen))
	for _, in := range chosen {
		list = append(list, in)
	}
	def := opts.Default
	if _, ok := chosen[opts.Preferred]; def == "" && ok {
		def = opts.Preferred
	}
	return newInterpreters(list, def)
}

// probePinned probes an operator-pinned interpreter and checks its version.
func probePinned(ctx context.Context, p pinned, cache *probeCache) (Interpreter, error) {
	real, err := realBinary(p.path)
	if err != nil {
		return Interpreter{}, fmt.Errorf("%s=%s: %w", p.version, p.path, err)
	}
	in, r, err := probe(ctx, real, cache)
	if err != nil {
		return Interpreter{}, fmt.Errorf("%s=%s: %w", p.version, p.path, err)
	}
	if in.Version != p.version.String() {
		return Interpreter{}, fmt.Errorf("%s=%s: the interpreter is Python %s", p.version, p.path, r.Version)
	}
	if r.Major != 3 || (minor{r.Major, r.Minor}).less(minimum()) {
		return Interpreter{}, fmt.Errorf("%s=%s: Python %s is older than %s", p.version, p.path, r.Version, MinVersion)
	}
	return in, nil
}

func minimum() minor {
	m, _ := parseMinor(MinVersion)
	return m
}

// candidates lists the paths to try, in search order, without duplicates
// of the same name.
func candidates(opts Options) []string {
	var paths []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] && isPythonName(filepath.Base(p)) {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, d := range opts.PathDirs {
		matches, _ := filepath.Glob(filepath.Join(d, "python3*")) // only ErrBadPattern, impossible here
		sort.Strings(matches)
		for _, m := range matches {
			add(m)
		}
	}
	for _, g := range opts.Globs {
		matches, err := filepath.Glob(g)
		if err != nil {
			continue // a malformed operator pattern matches nothing
		}
		sort.Strings(matches)
		for _, m := range matches {
			add(m)
		}
	}
	return paths
}

// candidate is a discovered, usable interpreter.
type candidate struct {
	in    Interpreter
	micro int // patch level, to prefer 3.11.7 over 3.11.2
}

// probeAll resolves and probes paths, at most probeParallelism at a time,
// and returns the usable interpreters in the order of paths. Each binary is
// probed once however many names lead to it.
func probeAll(ctx context.Context, paths []string, cache *probeCache, log *slog.Logger) []candidate {
	var reals []string
	seen := map[string]bool{}
	for _, p := range paths {
		real, err := realBinary(p)
		switch {
		case errors.Is(err, errNotBinary):
			log.Debug("skipping python candidate", "path", p, "reason", err)
			continue
		case err != nil:
			log.Info("skipping python candidate", "path", p, "reason", err)
			continue
		}
		if !seen[real] {
			seen[real] = true
			reals = append(reals, real)
		}
	}

	results := make([]*candidate, len(reals))
	sem := make(chan struct{}, probeParallelism)
	var wg sync.WaitGroup
	for i, real := range reals {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			in, r, err := probe(ctx, real, cache)
			if err != nil {
				log.Info("skipping python candidate", "path", real, "reason", err)
				return
			}
			// Too old, a pre-release, free-threaded: left out by design,
			// on many hosts at every start, so not worth an info line.
			if err := usable(r); err != nil {
				log.Debug("skipping python candidate", "path", real, "reason", err)
				return
			}
			results[i] = &candidate{in: in, micro: patchLevel(r.Version)}
		}()
	}
	wg.Wait()
	var out []candidate
	for _, c := range results {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// usable says why a discovered interpreter is not offered, or nil.
func usable(r probeResult) error {
	switch {
	case r.Major != 3 || (minor{r.Major, r.Minor}).less(minimum()):
		return fmt.Errorf("Python %s is older than %s", r.Version, MinVersion)
	case r.ReleaseLevel != "final":
		return fmt.Errorf("Python %s is a pre-release (pin it in PYEXEC_PYTHONS to use it)", r.Version)
	case r.GILDisabled:
		return fmt.Errorf("Python %s is a free-threaded build", r.Version)
	}
	return nil
}

// patchLevel returns the patch number of a full version ("3.12.1" → 1).
func patchLevel(full string) int {
	parts := strings.SplitN(full, ".", 3)
	if len(parts) < 3 {
		return 0
	}
	end := 0
	for end < len(parts[2]) && parts[2][end] >= '0' && parts[2][end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(parts[2][:end]) // "" (no digits) counts as 0
	return n
}
