package pyenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	// AwaitUV, when set and UV is empty, supplies uv instead of $PATH:
	// the first build waits for it (uv being fetched at first start), and
	// its error means the venv + pip fallback.
	AwaitUV func(context.Context) (string, error)
	// InstallTimeout bounds one environment build. Default 10 minutes.
	InstallTimeout time.Duration
	// Base lists the base environment's requirements; nil means
	// DefaultBasePackages. A script whose needs the base environment
	// covers runs in it.
	Base []string
	// AllowSourceBuilds lets installs build source distributions, which
	// runs package code. Off (the default), only wheels are installed.
	// On, every install runs in a jail from Jails whose only way out is
	// a proxy to the index hosts (IndexURL, ExtraIndexURLs; pypi.org
	// brings files.pythonhosted.org).
	AllowSourceBuilds bool
	// Jails runs source builds; required with AllowSourceBuilds.
	Jails BuildJails
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
	if err := MountableDir(c.Dir); err != nil {
		return fmt.Errorf("environment directory: %w", err)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("environment size cap must not be negative")
	}
	if c.InstallTimeout < time.Second {
		return fmt.Errorf("install timeout must be at least 1s")
	}
	if c.AllowSourceBuilds {
		if c.Jails == nil {
			return fmt.Errorf("source builds need a jail to run in")
		}
		if err := validSourceBuildIndexes(append([]string{c.IndexURL}, c.ExtraIndexURLs...)); err != nil {
			return err
		}
	}
	return nil
}

// ParseBaseList reads an operator's list of base requirements: entries
// separated by whitespace or by commas, where a comma followed by a
// version operator stays inside the entry ("scipy>=1.11,<2" is one
// entry). "-" alone means none.
func ParseBaseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "-" {
		return []string{}, nil
	}
	var out []string
	for _, field := range strings.Fields(s) {
		start := 0
		for i := 0; i < len(field); i++ {
			if field[i] != ',' {
				continue
			}
			if i+1 < len(field) && strings.IndexByte("<>=!~ ", field[i+1]) >= 0 {
				continue
			}
			if part := field[start:i]; part != "" {
				out = append(out, part)
			}
			start = i + 1
		}
		if part := field[start:]; part != "" {
			out = append(out, part)
		}
	}
	for _, e := range out {
		if _, err := ParseRequirement(e, FromProject); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// MountableDir reports why jails cannot mount dir at its own path: it is
// under a directory the jail replaces (/tmp, /proc, /dev, /etc, /work).
// It returns nil for a clean absolute path elsewhere.
func MountableDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("%q is not a clean absolute path", dir)
	}
	for _, reserved := range []string{"/tmp", "/proc", "/dev", "/etc", "/work"} {
		if dir == reserved || strings.HasPrefix(dir, reserved+"/") {
			return fmt.Errorf("%q is under %s, which jails cannot mount", dir, reserved)
		}
	}
	return nil
}

// checkTraversable makes sure the payload user can reach dir: every
// directory above it must be searchable by others.
func checkTraversable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("environment directory %s: %s is not searchable by other users (mode %v), so jails cannot reach it", dir, d, st.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}
