package run

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Config is the operator's configuration of what a run may be.
type Config struct {
	Limits
	// AllowNetwork lets requests ask for network access. Off by default:
	// a request that asks is rejected.
	AllowNetwork bool
	// Network is the egress every run with network goes through: the
	// operator's policy, the always-denied guard, the resolver and the
	// limits. Required with AllowNetwork.
	Network *egress.Config
	// Secrets are the operator's secrets file as last loaded (nil: none):
	// the secrets a request may ask for by name, and the HTTP rules of its
	// egress.
	Secrets *egress.LiveCatalog
	// TrustBundle is a host file (absolute, outside any workspace) of the
	// host's roots and the egress CA, bound read-only into the jails whose
	// egress terminates TLS, with the usual variables pointing at it
	// (secrets.go); "": none.
	TrustBundle string
	// Collect says that the files a run produces are collected (the
	// engine has somewhere to store them); MaxFiles and MaxFileBytes cap
	// them (count, total bytes), zero meaning the jail's defaults
	// (sandbox.DefaultCollectFiles, sandbox.DefaultCollectBytes).
	Collect      bool
	MaxFiles     int
	MaxFileBytes int64
}

// Deps are the planner's collaborators. Interpreters and Driver are
// required.
type Deps struct {
	Interpreters Interpreters
	Driver       Driver
	// Envs resolves dependencies; nil refuses requests with requirements
	// and detects nothing.
	Envs Environments
	// Linter serves lint requests; nil refuses them.
	Linter Linter
}

// Planner turns requests into plans. Build it with NewPlanner.
type Planner struct {
	cfg  Config
	deps Deps
}

// NewPlanner applies the defaults to cfg, checks it and returns the
// planner; errors name what is wrong.
func NewPlanner(cfg Config, deps Deps) (*Planner, error) {
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.AllowNetwork && (cfg.Network == nil || cfg.Network.Guard == nil):
		return nil, errors.New("network needs an egress configuration with a guard")
	case cfg.MaxFiles < 0 || cfg.MaxFileBytes < 0:
		return nil, errors.New("file collection limits must not be negative")
	}
	return &Planner{cfg: cfg, deps: deps}, nil
}

// Plan is a validated request turned into what the jail needs.
type Plan struct {
	Spec        sandbox.Spec
	Interpreter Interpreter
	Timeout     time.Duration
	Limits      AuditLimits
	Env         EnvPlan
	Network     egress.Policy // with Spec.Network
	// Secrets are the request's secrets bound to placeholders, for its
	// egress only: never stored, never logged.
	Secrets []egress.Bound
	// HTTPRules are the operator's HTTP rules from the same catalog as
	// Secrets, for its egress.
	HTTPRules []egress.HTTPRule
	// Workspace is mounted at /workspace when the run starts (nil: none).
	Workspace *WorkspaceUse
}

// AuditLimits are the limits a run has, as the audit trail records them.
type AuditLimits struct {
	TimeoutMs   int64   `json:"timeout_ms"`
	MemoryBytes int64   `json:"memory_bytes"`
	DiskBytes   int64   `json:"disk_bytes"`
	CPUs        float64 `json:"cpus"`
	Network     bool    `json:"network"`
}

// NetworkEvent is one connection attempt or lookup, as the record, the
// stream and the audit trail show it (docs/network.md).
type NetworkEvent = egress.Event

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

// Prepare validates req, resolves its dependencies (see env.go) and
// builds the jail spec. Every error wraps ErrInvalid, except a failure of
// the import detector.
func (pl *Planner) Prepare(ctx context.Context, req Request) (*Plan, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	np, err := pl.PlanNetwork(NetworkRequest{Network: req.Network, Allow: req.NetworkAllow, Secrets: req.Secrets,
		Caller: req.Caller})
	if err != nil {
		return nil, err
	}
	ws, err := workspaceUse(req)
	if err != nil {
		return nil, err
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
	env, err := BuildEnv(req.Env)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if env, err = np.Env(env, req.Env); err != nil {
		return nil, err
	}
	limits, err := pl.cfg.Limits.For(req)
	if err != nil {
		return nil, invalid("%v", err)
	}
	interp, err := pl.deps.Interpreters.Lookup(req.PythonVersion)
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
	if np.Trust != nil {
		mounts = append(mounts, *np.Trust)
	}
	p := &Plan{
		Spec: sandbox.Spec{
			Argv:          pl.deps.Driver.Argv(interp.Path, entry, driverOptions(req)),
			Env:           env,
			Dir:           sandbox.WorkDir,
			Files:         files,
			Mounts:        mounts,
			Network:       req.Network,
			Stdin:         []byte(req.Stdin),
			Limits:        limits,
			ResultChannel: true,
			StreamChannel: true,
			Collect:       pl.collectSpec(req),
		},
		Interpreter: interp,
		Network:     np.Policy,
		Secrets:     np.Secrets,
		HTTPRules:   np.HTTPRules,
		Workspace:   ws,
		Timeout:     limits.WallTime,
		Limits: AuditLimits{
			TimeoutMs:   limits.WallTime.Milliseconds(),
			MemoryBytes: limits.MemoryBytes,
			DiskBytes:   limits.WorkspaceBytes,
			CPUs:        limits.CPUs,
			Network:     req.Network,
		},
	}
	if err := p.Spec.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := pl.planEnv(ctx, req, p, entry); err != nil {
		return nil, err
	}
	return p, nil
}

// collectSpec is what the jail collects for req; nil when the engine has
// nowhere to store files.
func (pl *Planner) collectSpec(req Request) *sandbox.Collect {
	if !pl.cfg.Collect {
		return nil
	}
	return &sandbox.Collect{Globs: req.Collect, MaxFiles: pl.cfg.MaxFiles, MaxBytes: pl.cfg.MaxFileBytes}
}

// networkPolicy is the operator's policy narrowed by the request's allow
// list; an entry that does not parse is the request's error. An empty
// list is refused rather than read as "nothing" or "no list": the two
// meanings are far apart, and only the absent list means the operator's.
func (pl *Planner) networkPolicy(allow []string) (egress.Policy, error) {
	p := pl.cfg.Network.Policy
	if allow == nil {
		return p, nil
	}
	if len(allow) == 0 {
		return egress.Policy{}, errors.New("an empty network allow list (leave it out for the server's list)")
	}
	rules, err := egress.ParseRules(allow)
	if err != nil {
		return egress.Policy{}, err
	}
	return p.Narrow(rules), nil
}

// BuildEnv appends the request's KEY=value pairs to the base environment;
// a request entry replaces a base entry of the same key.
func BuildEnv(extra []string) ([]string, error) {
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
