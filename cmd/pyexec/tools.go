//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/api"
	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/provision"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// lintWait is how long a lint request that arrives while ruff is being
// fetched waits for it before the answer is 503: a fetch takes seconds.
const lintWait = 30 * time.Second

// toolset is how the server came by uv and ruff: named by --uv/--ruff,
// fetched (pinned) into DATA_DIR/tools in the background, or found on
// $PATH. It feeds /health and the start-up log.
type toolset struct {
	uv, ruff *toolSlot
	lint     *engine.LateLinter // nil when lint never had a chance
	envs     *pyenv.Environments

	prov *provision.Provisioner // nil when nothing is fetched
	wg   sync.WaitGroup         // the watchers of the fetches
}

// toolSlot is one tool's state.
type toolSlot struct {
	mu sync.Mutex
	h  api.ToolHealth
}

func (s *toolSlot) set(h api.ToolHealth) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *toolSlot) get() api.ToolHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// startTools settles uv (for envConfig's AwaitUV) and starts fetching
// what is missing; the linter comes from startLinter once the jails exist.
func startTools(cfg config.Config, log *slog.Logger) (*toolset, error) {
	t := &toolset{uv: &toolSlot{}, ruff: &toolSlot{}}
	e := cfg.Envs
	fetchUV := e.ProvisionTools && e.UV == "" && !e.NoUV
	fetchRuff := e.ProvisionTools && e.Ruff == ""
	if fetchUV || fetchRuff {
		dir, err := cfg.ToolsDir()
		if err != nil {
			return nil, fmt.Errorf("PYEXEC_DATA_DIR: %w", err)
		}
		t.prov = provision.New(provision.Config{Dir: dir, IndexURLs: append([]string{e.IndexURL}, e.ExtraIndexURLs...),
			TrustedHosts: e.TrustedHosts, Logger: log})
	}
	switch {
	case e.NoUV:
		t.uv.set(api.ToolHealth{State: "off", Detail: "--no-uv: environments are built with venv and pip"})
	case e.UV != "":
		p, err := pyenv.FindTool("uv", e.UV)
		if err != nil {
			return nil, fmt.Errorf("PYEXEC_UV: %w", err)
		}
		t.uv.set(api.ToolHealth{State: "ready", Source: "flag", Path: p})
	case fetchUV:
		t.uv.set(t.fetching(provision.UV))
	default:
		t.uv.set(onPath("uv", "environments are built with venv and pip, which is slower"))
	}
	return t, nil
}

// fetching describes tool while it is being fetched (or already there).
func (t *toolset) fetching(tool provision.Tool) api.ToolHealth {
	if p, ok := t.prov.Installed(tool); ok {
		return api.ToolHealth{State: "ready", Source: "provisioned", Version: tool.Version, Path: p}
	}
	return api.ToolHealth{State: "provisioning", Source: "provisioned", Version: tool.Version,
		Detail: "being fetched from the package index"}
}

// onPath describes tool found on $PATH, or its absence and what that
// means (without).
func onPath(tool, without string) api.ToolHealth {
	p, err := pyenv.FindTool(tool, "")
	if err != nil {
		return api.ToolHealth{State: "absent", Detail: tool + " is not on $PATH: " + without}
	}
	return api.ToolHealth{State: "ready", Source: "path", Path: p}
}

// configureUV points ec at uv: the fetched one when it is there already,
// else (while it is fetched) a wait for the fetch on the first build.
func (t *toolset) configureUV(ec *pyenv.EnvConfig, log *slog.Logger) {
	h := t.uv.get()
	switch {
	case h.Source == "provisioned" && h.State == "ready":
		ec.UV = h.Path
	case h.State == "provisioning":
		ec.AwaitUV = t.awaitUV(log)
	}
}

// awaitUV starts fetching uv and returns the AwaitUV of the environments:
// the first build waits for the fetch; if it fails, uv on $PATH serves,
// else pip does.
func (t *toolset) awaitUV(log *slog.Logger) func(context.Context) (string, error) {
	job := t.prov.Start(provision.UV)
	t.wg.Add(1)
	go func() { // reports the outcome on /health
		defer t.wg.Done()
		<-job.Done()
		t.settleUV(job)
	}()
	return func(ctx context.Context) (string, error) {
		p, err := job.Wait(ctx)
		if err == nil || ctx.Err() != nil {
			return p, err
		}
		if h := onPath("uv", ""); h.State == "ready" {
			log.Info("using uv from $PATH instead", "path", h.Path)
			return h.Path, nil
		}
		return "", err
	}
}

// settleUV records the end of uv's fetch.
func (t *toolset) settleUV(job *provision.Job) {
	p, err, _ := job.Result()
	if err == nil {
		t.uv.set(api.ToolHealth{State: "ready", Source: "provisioned", Version: job.Tool.Version, Path: p})
		return
	}
	h := onPath("uv", "environments are built with venv and pip, which is slower")
	h.Detail = "fetching the pinned uv failed (" + err.Error() + ")"
	if h.State == "ready" {
		h.Detail += "; using uv from $PATH"
	} else {
		h.Detail += "; environments are built with venv and pip, which is slower"
	}
	t.uv.set(h)
}

// startLinter gives deps a linter: now when ruff is named, fetched
// before or (without fetching) on $PATH; later when it is being fetched.
func (t *toolset) startLinter(cfg config.Config, jails *sandbox.Manager, deps *engine.Deps, log *slog.Logger) error {
	e := cfg.Envs
	lcfg := pyenv.LintConfig{Select: e.LintSelect, Ignore: e.LintIgnore}
	newLinter := func(ruff string) (engine.Linter, error) {
		lcfg.Ruff = ruff
		l, err := pyenv.NewLinter(jails, lcfg)
		if err != nil {
			return nil, err
		}
		return engine.PyenvLinter{L: l}, nil
	}
	switch {
	case e.Ruff != "":
		l, err := newLinter(e.Ruff)
		if err != nil {
			return fmt.Errorf("PYEXEC_RUFF: %w", err)
		}
		deps.Linter = l
		t.ruff.set(api.ToolHealth{State: "ready", Source: "flag", Path: e.Ruff})
		return nil
	case t.prov == nil || !e.ProvisionTools:
		h := onPath("ruff", "lint is unavailable (set --ruff or --provision-tools)")
		t.ruff.set(h)
		if h.State != "ready" {
			return nil
		}
		l, err := newLinter(h.Path)
		if err != nil {
			return err
		}
		deps.Linter = l
		return nil
	}
	h := t.fetching(provision.Ruff)
	t.ruff.set(h)
	if h.State == "ready" {
		l, err := newLinter(h.Path)
		if err != nil {
			return err
		}
		deps.Linter = l
		return nil
	}
	t.lint = engine.NewLateLinter("ruff is being fetched from the package index", lintWait)
	deps.Linter = t.lint
	job := t.prov.Start(provision.Ruff)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		<-job.Done()
		p, err, _ := job.Result()
		if err == nil {
			l, lerr := newLinter(p)
			if lerr == nil {
				t.lint.Set(l)
				t.ruff.set(api.ToolHealth{State: "ready", Source: "provisioned", Version: job.Tool.Version, Path: p})
				log.Info("lint is ready", "ruff", p)
				return
			}
			err = lerr
		}
		fallback := onPath("ruff", "")
		fallback.Detail = "fetching the pinned ruff failed (" + err.Error() + ")"
		if fallback.State == "ready" {
			if l, lerr := newLinter(fallback.Path); lerr == nil {
				t.lint.Set(l)
				fallback.Detail += "; using ruff from $PATH"
				t.ruff.set(fallback)
				return
			}
		}
		fallback.Detail += "; lint is unavailable (set --ruff)"
		t.ruff.set(fallback)
		t.lint.Fail("ruff could not be fetched; see /health")
	}()
	return nil
}

// close stops the fetches and waits for their watchers.
func (t *toolset) close() {
	if t.prov != nil {
		t.prov.Close()
	}
	t.wg.Wait()
}

// health is the tools part of /health.
func (t *toolset) health() api.ToolsHealth {
	h := api.ToolsHealth{UV: t.uv.get(), Ruff: t.ruff.get(), Lint: "unavailable"}
	if t.envs != nil {
		h.Installer = t.envs.Installer()
	}
	if h.Installer == "uv (pending)" { // settled by the first build; tell what it will be
		switch h.UV.State {
		case "ready":
			h.Installer = "uv"
		case "absent":
			h.Installer = "pip"
		}
	}
	switch {
	case t.lint != nil:
		h.Lint = t.lint.State()
	case h.Ruff.State == "ready":
		h.Lint = "ready"
	}
	return h
}

// logAttrs summarise the tools for the start-up log.
func (t *toolset) logAttrs() []any {
	h := t.health()
	return []any{"uv", h.UV.State + sourceSuffix(h.UV), "ruff", h.Ruff.State + sourceSuffix(h.Ruff), "installer", h.Installer, "lint", h.Lint}
}

func sourceSuffix(h api.ToolHealth) string {
	if h.Source == "" {
		return ""
	}
	return " (" + h.Source + ")"
}
