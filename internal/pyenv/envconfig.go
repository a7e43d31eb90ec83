package pyenv

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultBasePackages is the base environment built by `pyexec env
// prepare` and at startup unless the operator configures another.
var DefaultBasePackages = []string{"numpy", "pandas", "matplotlib", "requests", "beautifulsoup4", "scipy"}

// EnvConfig is the operator's configuration of dependency environments.
// Zero fields take the defaults documented on each.
type EnvConfig struct {
	// Dir holds the environments (envs/), builds in progress (tmp/), locks
	// (locks/) and the shared download cache (cache/). It must not be
	// under /tmp, /proc, /dev, /etc or /work: environments are mounted
	// into jails at their host path. Default /var/lib/pyexec/envs.
	Dir string
	// MaxBytes caps the disk used by environments; the least recently
	// used ones are evicted beyond it (never one in use, never the base
	// environment). Default 20 GiB.
	MaxBytes int64
	// IndexURL is the package index (PEP 503). Default
	// https://pypi.org/simple.
	IndexURL string
	// ExtraIndexURLs are further indexes searched after IndexURL.
	ExtraIndexURLs []string
	// TrustedHosts are index hosts whose TLS certificates are not
	// verified (private mirrors with self-signed certificates).
	TrustedHosts []string
	// UV is the uv binary; empty means "uv" on $PATH. When uv is absent,
	// environments are built with `python -m venv` and pip.
	UV string
	// NoUV forces the venv + pip fallback even when uv is available.
	NoUV bool
	// InstallTimeout bounds one environment build. Default 10 minutes.
	InstallTimeout time.Duration
	// Base lists the base environment's requirements; nil means
	// DefaultBasePackages. A script whose needs the base environment
	// covers runs in it.
	Base []string
	// Logger receives one line per build and eviction; nil discards.
	Logger *slog.Logger
}

func (c EnvConfig) withDefaults() EnvConfig {
	if c.Dir == "" {
		c.Dir = "/var/lib/pyexec/envs"
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = 20 << 30
	}
	if c.IndexURL == "" {
		c.IndexURL = "https://pypi.org/simple"
	}
	if c.InstallTimeout == 0 {
		c.InstallTimeout = 10 * time.Minute
	}
	if c.Base == nil {
		c.Base = DefaultBasePackages
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c EnvConfig) validate() error {
	if !filepath.IsAbs(c.Dir) || filepath.Clean(c.Dir) != c.Dir {
		return fmt.Errorf("environment directory %q is not a clean absolute path", c.Dir)
	}
	for _, reserved := range []string{"/tmp", "/proc", "/dev", "/etc", "/work"} {
		if c.Dir == reserved || strings.HasPrefix(c.Dir, reserved+"/") {
			return fmt.Errorf("environment directory %q is under %s, which jails cannot mount", c.Dir, reserved)
		}
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("environment size cap must not be negative")
	}
	if c.InstallTimeout < time.Second {
		return fmt.Errorf("install timeout must be at least 1s")
	}
	return nil
}

// EnvConfigFromEnv reads the configuration from the environment:
// PYEXEC_ENV_DIR, PYEXEC_ENV_MAX_BYTES, PYEXEC_INDEX_URL,
// PYEXEC_EXTRA_INDEX_URLS and PYEXEC_TRUSTED_HOSTS (comma-separated),
// PYEXEC_UV, PYEXEC_NO_UV=1, PYEXEC_INSTALL_TIMEOUT (a Go duration) and
// PYEXEC_BASE_PACKAGES (comma-separated; "-" for none).
func EnvConfigFromEnv(getenv func(string) string) (EnvConfig, error) {
	c := EnvConfig{
		Dir:            getenv("PYEXEC_ENV_DIR"),
		IndexURL:       getenv("PYEXEC_INDEX_URL"),
		ExtraIndexURLs: splitList(getenv("PYEXEC_EXTRA_INDEX_URLS")),
		TrustedHosts:   splitList(getenv("PYEXEC_TRUSTED_HOSTS")),
		UV:             getenv("PYEXEC_UV"),
		NoUV:           getenv("PYEXEC_NO_UV") == "1",
	}
	if v := getenv("PYEXEC_ENV_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return EnvConfig{}, fmt.Errorf("PYEXEC_ENV_MAX_BYTES: %w", err)
		}
		c.MaxBytes = n
	}
	if v := getenv("PYEXEC_INSTALL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return EnvConfig{}, fmt.Errorf("PYEXEC_INSTALL_TIMEOUT: %w", err)
		}
		c.InstallTimeout = d
	}
	switch v := getenv("PYEXEC_BASE_PACKAGES"); v {
	case "":
	case "-":
		c.Base = []string{}
	default:
		c.Base = splitList(v)
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
