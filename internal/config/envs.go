package config

import (
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// fallbackEnvDir holds the environments when the data dir is somewhere
// jails cannot mount (under /tmp, as test and --local data dirs are).
// Environments are content-addressed and locked across processes, so
// servers may share it.
const fallbackEnvDir = "/var/tmp/pyexec/envs"

// Envs configures dependency environments, import detection, policy and
// lint.
type Envs struct {
	// Dir holds the environments; empty means DataDir/envs, or
	// /var/tmp/pyexec/envs when that is not mountable (see EnvDir).
	Dir            string
	MaxBytes       int64         // disk cap of all environments; LRU eviction beyond
	IndexURL       string        // PEP 503 index
	ExtraIndexURLs []string      // searched after IndexURL
	TrustedHosts   []string      // index hosts whose TLS is not verified
	UV             string        // uv binary; empty means $PATH
	NoUV           bool          // build with venv + pip even when uv exists
	InstallTimeout time.Duration // bound of one environment build
	// AllowSourceBuilds lets environment builds build source
	// distributions, in a jail that reaches only the index hosts; off,
	// only wheels are installed.
	AllowSourceBuilds bool
	// BasePackages is the base environment, comma or space separated;
	// "-" means none.
	BasePackages string
	// PrepareBase builds the base environment in the background at
	// start-up (never delaying readiness).
	PrepareBase     bool
	NoDetectImports bool     // never install detected imports
	AllowPackages   []string // when set, the only installable distributions
	DenyPackages    []string // never installed
	ImportMapFile   string   // extra "import distribution" lines
	PolicyFile      string   // JSON policy rules
	Ruff            string   // ruff binary; empty means $PATH
	LintSelect      []string // ruff rule selectors of the default profile
	LintIgnore      []string
	// ProvisionTools fetches the pinned uv and ruff into DATA_DIR/tools
	// at start-up, in the background, for the ones UV and Ruff do not
	// name.
	ProvisionTools bool
	// ToolsDir keeps the fetched tools; empty means DATA_DIR/tools.
	ToolsDir string
}

func defaultEnvs() Envs {
	return Envs{
		MaxBytes:       20 << 30,
		IndexURL:       "https://pypi.org/simple",
		InstallTimeout: 10 * time.Minute,
		BasePackages:   strings.Join(pyenv.DefaultBasePackages, ","),
		PrepareBase:    true,
		LintSelect:     append([]string(nil), pyenv.DefaultLintSelect...),
		LintIgnore:     append([]string(nil), pyenv.DefaultLintIgnore...),
		ProvisionTools: true,
	}
}

// bind registers the environment flags on fs.
func (e *Envs) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.StringVar(&e.Dir, "env-dir", e.Dir, "")
	add("env-dir", "directory of dependency environments (default: DATA_DIR/envs, or "+fallbackEnvDir+" when the data dir is under /tmp or /work)")
	fs.Var(sizeValue{&e.MaxBytes}, "env-max-bytes", "")
	add("env-max-bytes", "disk cap of all environments; least recently used ones are evicted beyond it")
	fs.StringVar(&e.IndexURL, "index-url", e.IndexURL, "")
	add("index-url", "package index (PEP 503) environments are installed from")
	fs.StringSliceVar(&e.ExtraIndexURLs, "extra-index-urls", e.ExtraIndexURLs, "")
	add("extra-index-urls", "further package indexes, comma separated")
	fs.StringSliceVar(&e.TrustedHosts, "trusted-hosts", e.TrustedHosts, "")
	add("trusted-hosts", "index hosts whose TLS certificate is not verified, comma separated")
	fs.StringVar(&e.UV, "uv", e.UV, "")
	add("uv", "uv binary (default: the pinned uv fetched into DATA_DIR/tools, see --provision-tools; else uv on $PATH; without uv, venv and pip build environments)")
	fs.BoolVar(&e.NoUV, "no-uv", e.NoUV, "")
	add("no-uv", "build environments with venv and pip even when uv is available")
	fs.BoolVar(&e.AllowSourceBuilds, "allow-source-builds", e.AllowSourceBuilds, "")
	add("allow-source-builds", "let environment builds build source distributions (sdists), in a jail whose network reaches only the index hosts (default: wheels only)")
	fs.Var(secondsValue{&e.InstallTimeout}, "install-timeout", "")
	add("install-timeout", "time limit of one environment build")
	fs.StringVar(&e.BasePackages, "base-packages", e.BasePackages, "")
	add("base-packages", `base environment built at start-up, comma or space separated; "-" for none`)
	fs.BoolVar(&e.PrepareBase, "prepare-base", e.PrepareBase, "")
	add("prepare-base", "build the base environment in the background at start-up (false leaves it to pyexec env prepare)")
	fs.BoolVar(&e.NoDetectImports, "no-detect-imports", e.NoDetectImports, "")
	add("no-detect-imports", "do not install the distributions of imports found in the code")
	fs.StringSliceVar(&e.AllowPackages, "allow-packages", e.AllowPackages, "")
	add("allow-packages", "the only distributions that may be installed, comma separated (default: any)")
	fs.StringSliceVar(&e.DenyPackages, "deny-packages", e.DenyPackages, "")
	add("deny-packages", "distributions that are never installed, comma separated")
	fs.StringVar(&e.ImportMapFile, "import-map", e.ImportMapFile, "")
	add("import-map", `file of "import distribution" lines extending the curated import table`)
	fs.StringVar(&e.PolicyFile, "policy-file", e.PolicyFile, "")
	add("policy-file", `JSON policy rules on imports and calls (see docs/environments.md)`)
	fs.StringVar(&e.Ruff, "ruff", e.Ruff, "")
	add("ruff", "ruff binary for lint (default: the pinned ruff fetched into DATA_DIR/tools, see --provision-tools; else ruff on $PATH; without it lint is unavailable)")
	fs.BoolVar(&e.ProvisionTools, "provision-tools", e.ProvisionTools, "")
	add("provision-tools", "fetch the pinned uv and ruff from the package index into DATA_DIR/tools at start-up, in the background, unless --uv/--ruff name them (false: use $PATH only)")
	fs.StringVar(&e.ToolsDir, "tools-dir", e.ToolsDir, "")
	add("tools-dir", "directory the fetched uv and ruff are kept in (default: DATA_DIR/tools); servers may share it")
	fs.StringSliceVar(&e.LintSelect, "lint-select", e.LintSelect, "")
	add("lint-select", "ruff rules of the default lint profile, comma separated (the strict profile is ALL minus a few)")
	fs.StringSliceVar(&e.LintIgnore, "lint-ignore", e.LintIgnore, "")
	add("lint-ignore", "ruff rules the default lint profile ignores, comma separated")
}

// BindEnvironments registers only --data-dir and the environment flags,
// for commands that manage environments without serving.
func (c *Config) BindEnvironments(fs *pflag.FlagSet) {
	c.BindDataDir(fs)
	c.Envs.bind(fs)
}

// BindDataDir registers only --data-dir (PYEXEC_DATA_DIR), for commands
// that work on a server's data directory without serving.
func (c *Config) BindDataDir(fs *pflag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "")
	describe(fs, "data-dir", "directory for execution records, queue and environments")
}

// ToolsDir is where pinned tools are fetched: Envs.ToolsDir, else
// DATA_DIR/tools.
func (c *Config) ToolsDir() (string, error) {
	if c.Envs.ToolsDir != "" {
		return filepath.Abs(c.Envs.ToolsDir)
	}
	data, err := filepath.Abs(c.DataDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(data, "tools"), nil
}

// EnvDir is the directory of dependency environments: Envs.Dir when set,
// else DATA_DIR/envs, else — when the data dir is where jails cannot
// mount an environment at its own path (/tmp, /work...) — the shared
// /var/tmp/pyexec/envs.
func (c *Config) EnvDir() (string, error) {
	if c.Envs.Dir != "" {
		return filepath.Abs(c.Envs.Dir)
	}
	data, err := filepath.Abs(c.DataDir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(data, "envs")
	if pyenv.MountableDir(dir) != nil {
		return fallbackEnvDir, nil
	}
	return dir, nil
}

// Base returns the base environment's requirements (empty for none).
func (e *Envs) Base() ([]string, error) { return pyenv.ParseBaseList(e.BasePackages) }

// validate adds the problems of the environment settings to bad.
func (c *Config) validateEnvs(bad func(env, format string, args ...any)) {
	e := &c.Envs
	if dir, err := c.EnvDir(); err != nil {
		bad("PYEXEC_ENV_DIR", "%v", err)
	} else if err := pyenv.MountableDir(dir); err != nil {
		bad("PYEXEC_ENV_DIR", "%v; choose a directory outside /tmp, /proc, /dev, /etc and /work, e.g. %s", err, fallbackEnvDir)
	}
	if e.MaxBytes < 1<<20 {
		bad("PYEXEC_ENV_MAX_BYTES", "must be at least 1MiB, got %d", e.MaxBytes)
	}
	for _, u := range append([]string{e.IndexURL}, e.ExtraIndexURLs...) {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "file") || (p.Scheme != "file" && p.Host == "") {
			env := "PYEXEC_INDEX_URL"
			if u != e.IndexURL {
				env = "PYEXEC_EXTRA_INDEX_URLS"
			}
			bad(env, "%q is not an http(s) or file URL", u)
		}
	}
	for _, h := range e.TrustedHosts {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			bad("PYEXEC_TRUSTED_HOSTS", "%q is not a host or host:port", h)
		}
	}
	if e.AllowSourceBuilds && c.UnsafeNoIsolation {
		bad("PYEXEC_ALLOW_SOURCE_BUILDS", "source builds run in a jail, which --unsafe-no-isolation does not have")
	}
	if e.InstallTimeout < time.Second {
		bad("PYEXEC_INSTALL_TIMEOUT", "must be at least 1s, got %v", e.InstallTimeout)
	}
	if _, err := e.Base(); err != nil {
		bad("PYEXEC_BASE_PACKAGES", "%v", err)
	}
	type list struct {
		env   string
		items []string
	}
	for _, l := range []list{{"PYEXEC_ALLOW_PACKAGES", e.AllowPackages}, {"PYEXEC_DENY_PACKAGES", e.DenyPackages}} {
		for _, n := range l.items {
			if r, err := pyenv.ParseRequirement(n, pyenv.FromProject); err != nil || r.Spec != r.Name {
				bad(l.env, "%q is not a distribution name", n)
			}
		}
	}
	if len(e.LintSelect) == 0 {
		bad("PYEXEC_LINT_SELECT", "must select at least one rule (ALL selects every rule)")
	}
	for _, l := range []list{{"PYEXEC_LINT_SELECT", e.LintSelect}, {"PYEXEC_LINT_IGNORE", e.LintIgnore}} {
		for _, r := range l.items {
			if !pyenv.ValidLintRule(r) {
				bad(l.env, "%q is not ALL, a ruff linter prefix or a rule code", r)
			}
		}
	}
}

// ValidateEnvironments checks only the data dir and the environment
// settings (for `pyexec env`).
func (c *Config) ValidateEnvironments() error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, c.problem(env, format, args...))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("PYEXEC_DATA_DIR", "must not be empty")
	}
	c.validateEnvs(bad)
	return errors.Join(errs...)
}
