//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/provision"
	"github.com/pyexec/pyexec/internal/pyenv"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// lowDiskBytes is the free space below which doctor warns: one environment
// with the data-science base takes 250-400 MiB, and builds need as much
// again while they run.
const lowDiskBytes = 2 << 30

// indexTimeout bounds doctor's request to the package index.
const indexTimeout = 5 * time.Second

// doctorCheck is one line of doctor's report. Isolation layers keep the
// shape sandbox.Probe gives them; the other checks add what to do.
type doctorCheck struct {
	Layer    string `json:"layer"`
	OK       bool   `json:"ok"`
	Required bool   `json:"required"` // a missing required one makes doctor exit 1
	Skipped  bool   `json:"skipped,omitempty"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
}

// isolationChecks are the jail's layers, probed as serve would build
// them (its jails' cgroups under --cgroup-parent).
func isolationChecks(cfg config.Config) []doctorCheck {
	var out []doctorCheck
	for _, c := range sandbox.Probe(sandbox.Config{CgroupParent: cfg.CgroupParent}) {
		d := doctorCheck{Layer: c.Layer, OK: c.OK, Required: c.Required, Detail: c.Detail}
		if !c.OK && c.Required {
			d.Fix = "run on a host with this layer (see docs/deploy.md), or --unsafe-no-isolation for development only"
		}
		out = append(out, d)
	}
	return out
}

// hostChecks are what serve needs besides the jail: interpreters, uv,
// ruff, the data dir and its disk and, when checkIndex, the index.
func hostChecks(ctx context.Context, cfg config.Config, checkIndex bool) []doctorCheck {
	out := []doctorCheck{pythonCheck(ctx)}
	out = append(out, toolCheck(cfg, "uv", cfg.Envs.UV, provision.UV,
		"environments are built with venv and pip instead (slower)"))
	out = append(out, toolCheck(cfg, "ruff", cfg.Envs.Ruff, provision.Ruff, "lint is unavailable"))
	out = append(out, dataDirCheck(cfg.DataDir))
	out = append(out, diskChecks(cfg)...)
	if checkIndex {
		out = append(out, indexCheck(ctx, cfg.Envs.IndexURL))
	} else {
		out = append(out, doctorCheck{Layer: "index", OK: true, Skipped: true, Detail: "not checked (--check-index sends one request to " + cfg.Envs.IndexURL + ")"})
	}
	return out
}

func pythonCheck(ctx context.Context) doctorCheck {
	popts := pyenv.OptionsFromEnv(os.Getenv)
	popts.Preferred = defaultPython
	set, err := pyenv.Discover(ctx, popts)
	if err != nil {
		return doctorCheck{Layer: "python", Required: true, Detail: err.Error(),
			Fix: "install CPython 3.8 or newer (e.g. apt-get install python3), or name interpreters in PYEXEC_PYTHONS"}
	}
	return doctorCheck{Layer: "python", OK: true, Required: true,
		Detail: fmt.Sprintf("%s (default %s)", strings.Join(set.Versions(), ", "), set.Default().Version)}
}

// toolCheck finds a helper as serve would: the flag, the fetched pinned
// version, $PATH.
func toolCheck(cfg config.Config, name, flag string, pinned provision.Tool, without string) doctorCheck {
	flagName := "--" + name
	if flag != "" {
		p, err := pyenv.FindTool(name, flag)
		if err != nil {
			return doctorCheck{Layer: name, Required: true, Detail: err.Error(),
				Fix: "point " + flagName + " (" + config.EnvName(name) + ") at an executable " + name}
		}
		return doctorCheck{Layer: name, OK: true, Detail: p + " (" + flagName + ")"}
	}
	if name == "uv" && cfg.Envs.NoUV {
		return doctorCheck{Layer: name, OK: true, Detail: "off (--no-uv): environments are built with venv and pip"}
	}
	if dir, err := cfg.ToolsDir(); err == nil && cfg.Envs.ProvisionTools {
		if p, ok := provision.Installed(dir, pinned); ok {
			return doctorCheck{Layer: name, OK: true, Detail: fmt.Sprintf("%s (pinned %s, fetched)", p, pinned.Version)}
		}
	}
	if p, err := pyenv.FindTool(name, ""); err == nil {
		detail := p + " (on $PATH)"
		if cfg.Envs.ProvisionTools {
			detail += fmt.Sprintf("; serve fetches the pinned %s %s and prefers it", name, pinned.Version)
		}
		return doctorCheck{Layer: name, OK: true, Detail: detail}
	}
	if cfg.Envs.ProvisionTools {
		return doctorCheck{Layer: name, OK: true, Detail: fmt.Sprintf("not fetched yet: serve fetches the pinned %s %s from the index at start", name, pinned.Version),
			Fix: "let `pyexec serve` start once with the index reachable (see the index check)"}
	}
	return doctorCheck{Layer: name, Detail: "not on $PATH and --provision-tools is off: " + without,
		Fix: "install " + name + " (pip install " + name + "), set " + flagName + ", or drop --provision-tools=false"}
}

// dataDirCheck tells whether serve can write its data dir.
func dataDirCheck(dataDir string) doctorCheck {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return doctorCheck{Layer: "data-dir", Required: true, Detail: err.Error(), Fix: "set --data-dir to a usable path"}
	}
	dir := existingParent(abs)
	f, err := os.CreateTemp(dir, ".pyexec-doctor-")
	if err != nil {
		return doctorCheck{Layer: "data-dir", Required: true, Detail: fmt.Sprintf("%s: %s is not writable: %v", abs, dir, err),
			Fix: "run as a user who may write there, or set --data-dir (PYEXEC_DATA_DIR) elsewhere"}
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	detail := abs + " is writable"
	if dir != abs {
		detail = abs + " does not exist yet; serve creates it in " + dir + ", which is writable"
	}
	return doctorCheck{Layer: "data-dir", OK: true, Required: true, Detail: detail}
}

// diskChecks report the free space where the data and the environments
// go.
func diskChecks(cfg config.Config) []doctorCheck {
	dirs := []string{}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		dirs = append(dirs, abs)
	}
	if env, err := cfg.EnvDir(); err == nil && !strings.HasPrefix(env, dirs[0]+"/") {
		dirs = append(dirs, env)
	}
	var out []doctorCheck
	for _, d := range dirs {
		free, err := freeBytes(existingParent(d))
		switch {
		case err != nil:
			out = append(out, doctorCheck{Layer: "disk", Detail: fmt.Sprintf("%s: %v", d, err)})
		case free < lowDiskBytes:
			out = append(out, doctorCheck{Layer: "disk", Detail: fmt.Sprintf("%s: %.1f GiB free; an environment takes up to 0.4 GiB", d, float64(free)/(1<<30)),
				Fix: "free space, lower --env-max-bytes, or move --data-dir / --env-dir to a larger disk"})
		default:
			out = append(out, doctorCheck{Layer: "disk", OK: true, Detail: fmt.Sprintf("%s: %.1f GiB free", d, float64(free)/(1<<30))})
		}
	}
	return out
}

// indexCheck sends one HEAD request to the index.
func indexCheck(ctx context.Context, index string) doctorCheck {
	if strings.HasPrefix(index, "file:") {
		p := strings.TrimPrefix(strings.TrimPrefix(index, "file://"), "file:")
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return doctorCheck{Layer: "index", Detail: index + " is not a directory", Fix: "set --index-url to an existing PEP 503 directory or URL"}
		}
		return doctorCheck{Layer: "index", OK: true, Detail: index + " (a local directory)"}
	}
	ctx, cancel := context.WithTimeout(ctx, indexTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, index, nil)
	if err != nil {
		return doctorCheck{Layer: "index", Detail: err.Error(), Fix: "set --index-url to a valid URL"}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return doctorCheck{Layer: "index", Detail: fmt.Sprintf("%s is unreachable: %v", index, err),
			Fix: "check the network and HTTPS_PROXY, or point --index-url (PYEXEC_INDEX_URL) at a reachable mirror; without it only built environments work"}
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return doctorCheck{Layer: "index", Detail: fmt.Sprintf("%s answered %s", index, resp.Status),
			Fix: "retry later, or point --index-url at another mirror"}
	}
	return doctorCheck{Layer: "index", OK: true, Detail: fmt.Sprintf("%s is reachable (%s)", index, resp.Status)}
}

// existingParent is p or its nearest ancestor that exists.
func existingParent(p string) string {
	for {
		if _, err := os.Stat(p); err == nil || p == "/" || p == "." {
			return p
		}
		p = filepath.Dir(p)
	}
}
