package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// plan is a validated request turned into what the jail needs.
type plan struct {
	spec        sandbox.Spec
	interpreter Interpreter
	timeout     time.Duration
	limits      auditLimits
	env         envPlan
	network     egress.Policy // with spec.Network
}

// BaseEnv is the payload's environment before the request's additions.
// Nothing of the server's own environment is passed on.
func BaseEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + sandbox.WorkDir,
		// Library caches (fontconfig, matplotlib) go to /tmp, so that they
		// are not collected as files the run produced.
		"XDG_CACHE_HOME=/tmp/.cache",
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1",
	}
}

// prepare validates req, resolves its dependencies (see env.go) and
// builds the jail spec. Every error wraps ErrInvalid, except a failure of
// the import detector.
func (e *Engine) prepare(ctx context.Context, req Request) (*plan, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if req.Network && !e.cfg.AllowNetwork {
		return nil, invalid("network access is disabled on this server")
	}
	if !req.Network && req.NetworkAllow != nil {
		return nil, invalid("a network allow list without network")
	}
	var network egress.Policy
	if req.Network {
		var err error
		if network, err = e.networkPolicy(req); err != nil {
			return nil, invalid("%v", err)
		}
	}
	if len(req.Files) == 0 {
		return nil, invalid("no files")
	}
	// An entrypoint missing from the files is not refused: as with
	// `python missing.py` (and python-executor), the run ends with exit
	// code 2 and Python's "can't open file" message on stderr.
	entry := path.Clean(req.Entrypoint)
	if req.Entrypoint == "" || path.IsAbs(entry) || entry == ".." || strings.HasPrefix(entry, "../") {
		return nil, invalid("entrypoint %q is not a path inside the workspace", req.Entrypoint)
	}
	if err := validateRich(req); err != nil {
		return nil, invalid("%v", err)
	}
	env, err := buildEnv(req.Env)
	if err != nil {
		return nil, invalid("%v", err)
	}
	limits, err := e.limits(req)
	if err != nil {
		return nil, invalid("%v", err)
	}
	interp, err := e.deps.Interpreters.Lookup(req.PythonVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}

	files := make([]sandbox.File, len(req.Files))
	for i, f := range req.Files {
		files[i] = sandbox.File{Path: f.Path, Data: f.Data, Mode: f.Mode}
	}
	mounts := make([]sandbox.Mount, len(interp.Mounts))
	for i, m := range interp.Mounts {
		mounts[i] = sandbox.Mount{Source: m}
	}
	p := &plan{
		spec: sandbox.Spec{
			Argv:          e.deps.Driver.Argv(interp.Path, entry, driverOptions(req)),
			Env:           env,
			Dir:           sandbox.WorkDir,
			Files:         files,
			Mounts:        mounts,
			Network:       req.Network,
			Stdin:         []byte(req.Stdin),
			Limits:        limits,
			ResultChannel: true,
			StreamChannel: true,
			Collect:       e.collectSpec(req),
		},
		interpreter: interp,
		network:     network,
		timeout:     limits.WallTime,
		limits: auditLimits{
			TimeoutMs:   limits.WallTime.Milliseconds(),
			MemoryBytes: limits.MemoryBytes,
			DiskBytes:   limits.WorkspaceBytes,
			CPUs:        limits.CPUs,
			Network:     req.Network,
		},
	}
	if err := p.spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := e.planEnv(ctx, req, p, entry); err != nil {
		return nil, err
	}
	return p, nil
}

// limits maps the request's limits onto the jail's, applying the server's
// defaults and refusing values above its maximums.
func (e *Engine) limits(req Request) (sandbox.Limits, error) {
	c := e.cfg
	pick := func(v, def, max int64, what string) (int64, error) {
		switch {
		case v < 0:
			return 0, fmt.Errorf("%s must not be negative", what)
		case v == 0:
			return def, nil
		case v > max:
			return 0, fmt.Errorf("%s %d exceeds the server's limit of %d", what, v, max)
		}
		return v, nil
	}
	timeout, err := pick(int64(req.Timeout), int64(c.DefaultTimeout), int64(c.MaxTimeout), "timeout")
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("timeout %s: %w", req.Timeout, err)
	}
	mem, err := pick(req.MemoryBytes, c.DefaultMemoryBytes, c.MaxMemoryBytes, "memory")
	if err != nil {
		return sandbox.Limits{}, err
	}
	disk, err := pick(req.DiskBytes, c.DefaultDiskBytes, c.MaxDiskBytes, "disk")
	if err != nil {
		return sandbox.Limits{}, err
	}
	if req.CPUShares < 0 {
		return sandbox.Limits{}, fmt.Errorf("cpu_shares must not be negative")
	}
	cpus := c.DefaultCPUs
	if req.CPUShares > 0 {
		cpus = max(float64(req.CPUShares)/1024, c.MinCPUs)
	}
	return sandbox.Limits{
		WallTime:       time.Duration(timeout),
		CPUTime:        time.Duration(timeout),
		MemoryBytes:    mem,
		CPUs:           cpus,
		WorkspaceBytes: disk,
		StdoutBytes:    c.OutputBytes,
		StderrBytes:    c.OutputBytes,
	}, nil
}

// buildEnv appends the request's KEY=value pairs to the base environment;
// a request entry replaces a base entry of the same key.
func buildEnv(extra []string) ([]string, error) {
	env := BaseEnv()
	for _, kv := range extra {
		key, _, ok := strings.Cut(kv, "=")
		if !ok || key == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("environment entry %q is not KEY=value", kv)
		}
		env = slices.DeleteFunc(env, func(b string) bool { return strings.HasPrefix(b, key+"=") })
		env = append(env, kv)
	}
	return env, nil
}

// codeHash is the sha256 of a request's files: for each file in order, its
// path length, path, data length and data, so that no two different file
// sets hash alike.
func codeHash(files []File) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// timeoutMessage is the wire error of a timed-out execution.
func timeoutMessage(d time.Duration) string {
	return "execution timeout after " + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
