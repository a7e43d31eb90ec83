package interp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// probeScript prints what Discover needs to know about an interpreter. It
// runs under -I -S: no environment, no site-packages, nothing of the user's.
const probeScript = `import json, sys, sysconfig
paths = sysconfig.get_paths()
print(json.dumps({
    "implementation": sys.implementation.name,
    "version": sys.version.split()[0],
    "major": sys.version_info[0], "minor": sys.version_info[1],
    "releaselevel": sys.version_info[3],
    "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
    "stdlib": [paths["stdlib"], paths["platstdlib"]],
    "libs": sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libpython" in l}),
}))
`

// probeBounds bound a probe's attempts. A healthy interpreter answers in
// ~50 ms, but on a host whose CPUs are taken (a busy machine, a guest under
// emulation) a first start that reads the interpreter from a cold disk has
// been seen to need more than 10 s; only an attempt that ran out of time is
// tried again, with the longer bound, so a broken interpreter still fails
// at once.
var probeBounds = [...]time.Duration{10 * time.Second, 40 * time.Second}

// probeResult is the probe script's answer.
type probeResult struct {
	Implementation string   `json:"implementation"`
	Version        string   `json:"version"`
	Major          int      `json:"major"`
	Minor          int      `json:"minor"`
	ReleaseLevel   string   `json:"releaselevel"`
	GILDisabled    bool     `json:"gil_disabled"`
	Prefixes       []string `json:"prefixes"`
	Stdlib         []string `json:"stdlib"`
	Libs           []string `json:"libs"`
}

// errNotBinary marks a candidate that is a script (a pyenv shim) or some
// other non-ELF file: it is never run.
var errNotBinary = errors.New("not an ELF executable")

// realBinary resolves every symlink of path and checks that the result is
// an ELF file executable by anyone (the payload runs unprivileged).
func realBinary(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o001 == 0 {
		return "", fmt.Errorf("%s: not a regular file executable by others", real)
	}
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "\x7fELF" {
		return "", fmt.Errorf("%s: %w", real, errNotBinary)
	}
	return real, nil
}

// probe runs the interpreter at real (a resolved ELF binary), or takes its
// answer from cache (may be nil) if nothing it depends on changed since,
// and turns the answer into an Interpreter.
func probe(ctx context.Context, real string, cache *probeCache) (Interpreter, probeResult, error) {
	r, ok := cache.lookup(real)
	if !ok {
		binary, idErr := identify(real) // as it was when run: see probeCache.store
		var stdout bytes.Buffer
		err := withRetryOnTimeout(ctx, probeBounds[:], func(ctx context.Context) error {
			stdout.Reset()
			return runProbe(ctx, real, &stdout)
		})
		if err != nil {
			return Interpreter{}, probeResult{}, err
		}
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return Interpreter{}, probeResult{}, fmt.Errorf("probing %s: unexpected answer %q: %w", real, firstLine(stdout.String()), err)
		}
		if idErr == nil {
			cache.store(binary, r)
		}
	}
	if r.Implementation != "cpython" {
		return Interpreter{}, r, fmt.Errorf("%s: %s is not CPython", real, r.Implementation)
	}
	mounts, err := mountsFor(real, r)
	if err != nil {
		return Interpreter{}, r, err
	}
	return Interpreter{
		Version: minor{r.Major, r.Minor}.String(),
		Full:    r.Version,
		Path:    real,
		Mounts:  mounts,
	}, r, nil
}

// errProbeTimeout marks a probe attempt that ran out of its bound.
var errProbeTimeout = errors.New("no answer in time")

// runProbe runs the probe script once, its answer in stdout.
func runProbe(ctx context.Context, real string, stdout *bytes.Buffer) error {
	cmd := exec.CommandContext(ctx, real, "-I", "-S", "-c", probeScript)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.Dir = "/"
	// Its own process group: Ctrl-C in the terminal of a server started
	// by hand must not reach it (the server stops its work itself).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	err := cmd.Run()
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("probing %s: %w", real, errProbeTimeout)
	}
	if err != nil {
		return fmt.Errorf("probing %s: %w: %s", real, err, firstLine(stderr.String()))
	}
	return nil
}

// withRetryOnTimeout runs attempt under each bound in turn until it ends
// without errProbeTimeout; any other outcome, or the end of ctx, is final.
func withRetryOnTimeout(ctx context.Context, bounds []time.Duration, attempt func(context.Context) error) error {
	var err error
	for _, bound := range bounds {
		actx, cancel := context.WithTimeout(ctx, bound)
		err = attempt(actx)
		cancel()
		if !errors.Is(err, errProbeTimeout) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// mountsFor returns the smallest set of directories outside systemDirs that
// holds the binary, its prefixes, its standard library and libpython, and
// checks that the unprivileged payload user can enter each one.
func mountsFor(real string, r probeResult) ([]string, error) {
	need := []string{filepath.Dir(real)}
	need = append(need, r.Prefixes...)
	need = append(need, r.Stdlib...)
	for _, lib := range r.Libs {
		need = append(need, filepath.Dir(lib))
	}
	// Every jail mounts these; nothing under them is a Mount.
	system := []string{"/usr", "/lib", "/lib64", "/bin", "/sbin"}
	var dirs []string
	for _, d := range need {
		if d == "" {
			continue
		}
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // e.g. an exec_prefix that the build never created
			}
			return nil, fmt.Errorf("%s: %w", real, err)
		}
		if !under(rd, system) {
			dirs = append(dirs, rd)
		}
	}
	var out []string
	for _, d := range dirs {
		if underOther(d, dirs) || slices.Contains(out, d) {
			continue
		}
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", real, err)
		}
		if st.Mode().Perm()&0o005 != 0o005 {
			return nil, fmt.Errorf("%s: %s is not readable by the unprivileged payload user", real, d)
		}
		out = append(out, d)
	}
	return out, nil
}

// under reports whether path is one of dirs or inside one of them.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// underOther reports whether path is strictly inside another of dirs.
func underOther(path string, dirs []string) bool {
	for _, d := range dirs {
		if d != path && strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
