//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/provision"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// envConfig carries the serve configuration over to pyenv's
// environments; jails runs source builds when they are allowed.
func envConfig(cfg config.Config, log *slog.Logger, jails pyenv.BuildJails) (pyenv.EnvConfig, error) {
	dir, err := cfg.EnvDir()
	if err != nil {
		return pyenv.EnvConfig{}, fmt.Errorf("PYEXEC_ENV_DIR: %w", err)
	}
	base, err := cfg.Envs.Base()
	if err != nil {
		return pyenv.EnvConfig{}, fmt.Errorf("PYEXEC_BASE_PACKAGES: %w", err)
	}
	e := cfg.Envs
	if e.UV == "" && !e.NoUV && e.ProvisionTools {
		if tdir, err := cfg.ToolsDir(); err == nil {
			if p, ok := provision.Installed(tdir, provision.UV); ok {
				e.UV = p // fetched by a server on this data dir
			}
		}
	}
	return pyenv.EnvConfig{
		Dir:            dir,
		MaxBytes:       e.MaxBytes,
		IndexURL:       e.IndexURL,
		ExtraIndexURLs: e.ExtraIndexURLs,
		TrustedHosts:   e.TrustedHosts,
		UV:             e.UV,
		NoUV:           e.NoUV,
		InstallTimeout: e.InstallTimeout,
		Base:           base,
		Logger:         log,

		AllowSourceBuilds: e.AllowSourceBuilds,
		Jails:             jails,
	}, nil
}

// openEnvironments opens the environment directory of cfg; jails runs
// source builds when cfg allows them.
func openEnvironments(cfg config.Config, log *slog.Logger, jails pyenv.BuildJails) (*pyenv.Environments, error) {
	ec, err := envConfig(cfg, log, jails)
	if err != nil {
		return nil, err
	}
	envs, err := pyenv.NewEnvironments(ec)
	if err != nil {
		return nil, fmt.Errorf("environments (PYEXEC_ENV_DIR=%s): %w", ec.Dir, err)
	}
	return envs, nil
}

// resolverConfig reads the operator's import map and policy files.
func resolverConfig(cfg config.Config) (pyenv.ResolverConfig, error) {
	e := cfg.Envs
	rc := pyenv.ResolverConfig{
		Imports:          pyenv.DefaultImportMap(),
		Allow:            append([]string(nil), e.AllowPackages...),
		Deny:             append([]string(nil), e.DenyPackages...),
		DisableDetection: e.NoDetectImports,
	}
	if e.ImportMapFile != "" {
		b, err := os.ReadFile(e.ImportMapFile)
		if err != nil {
			return rc, fmt.Errorf("PYEXEC_IMPORT_MAP: %w", err)
		}
		extra, err := pyenv.ParseImportMap(string(b))
		if err != nil {
			return rc, fmt.Errorf("PYEXEC_IMPORT_MAP %s: %w", e.ImportMapFile, err)
		}
		rc.Imports = rc.Imports.With(extra)
	}
	if e.PolicyFile != "" {
		b, err := os.ReadFile(e.PolicyFile)
		if err != nil {
			return rc, fmt.Errorf("PYEXEC_POLICY_FILE: %w", err)
		}
		if rc.Policy, err = pyenv.ParsePolicy(b); err != nil {
			return rc, fmt.Errorf("PYEXEC_POLICY_FILE %s: %w", e.PolicyFile, err)
		}
	}
	return rc, nil
}

// baseState is what /health says about the base environment.
type baseState struct{ v atomic.Value }

func (b *baseState) set(s string) { b.v.Store(s) }

// String is "none", "building", "ready" or "failed: why".
func (b *baseState) String() string {
	s, _ := b.v.Load().(string)
	return s
}

// startEnvironments gives the stack dependency environments, import
// detection, policy and lint, and starts building the base environment
// in the background when cfg asks for it: readiness never waits for it,
// and a request that needs more than it builds what it needs.
func (s *stack) startEnvironments(ctx context.Context, cfg config.Config, jails *sandbox.Manager, deps *engine.Deps) error {
	log := s.log.With("component", "pyenv")
	rc, err := resolverConfig(cfg)
	if err != nil {
		return err
	}
	res, err := pyenv.NewResolver(pyenv.NewAnalyzer(jails, pyenv.AnalyzerConfig{Logger: log}), rc)
	if err != nil {
		return fmt.Errorf("PYEXEC_POLICY_FILE: %w", err)
	}
	tools, err := startTools(cfg, log)
	if err != nil {
		return err
	}
	s.tools = tools
	s.closers = append(s.closers, func(context.Context) error { tools.close(); return nil })
	ec, err := envConfig(cfg, log, jails)
	if err != nil {
		return err
	}
	tools.configureUV(&ec, log)
	envs, err := pyenv.NewEnvironments(ec)
	if err != nil {
		return fmt.Errorf("environments (PYEXEC_ENV_DIR=%s): %w", ec.Dir, err)
	}
	s.closers = append(s.closers, func(context.Context) error { envs.Close(); return nil })
	deps.Envs = engine.PyenvEnvironments{Resolver: res, Envs: envs}
	tools.envs = envs
	if err := tools.startLinter(cfg, jails, deps, log); err != nil {
		return err
	}
	log.Info("tools", tools.logAttrs()...)
	s.envs = envs
	s.base = &baseState{}
	if len(envs.BaseSet()) == 0 {
		s.base.set("none")
		return nil
	}
	if !cfg.Envs.PrepareBase {
		s.base.set("not prepared (run `pyexec env prepare`)")
		return nil
	}
	in := s.pythons.Default()
	s.base.set("building")
	bctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		env, err := envs.PrepareBase(bctx, in, func(line string) { log.Debug("base environment", "install", line) })
		if err != nil && bctx.Err() != nil {
			s.base.set("not prepared (the server stopped first)")
			return
		}
		if err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			s.base.set("failed: " + msg)
			log.Error("building the base environment failed; requests build what they need", "python", in.Full, "err", err)
			return
		}
		s.base.set("ready")
		log.Info("base environment ready", "python", env.Python, "key", env.Key, "dir", env.Dir)
	}()
	s.closers = append(s.closers, func(context.Context) error { cancel(); wg.Wait(); return nil })
	return nil
}
