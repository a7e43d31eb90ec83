package config

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestEnvSettings(t *testing.T) {
	t.Run("flags and environment fill every knob", func(t *testing.T) {
		c, err := load(t, []string{"--env-dir", "/srv/envs", "--lint-ignore", "E501,D"}, map[string]string{
			"PYEXEC_ENV_MAX_BYTES":       "5GiB",
			"PYEXEC_INDEX_URL":           "https://mirror.example/simple",
			"PYEXEC_EXTRA_INDEX_URLS":    "https://a.example/simple,https://b.example/simple",
			"PYEXEC_TRUSTED_HOSTS":       "mirror.example:8443",
			"PYEXEC_NO_UV":               "true",
			"PYEXEC_INSTALL_TIMEOUT":     "90",
			"PYEXEC_ALLOW_SOURCE_BUILDS": "true",
			"PYEXEC_BASE_PACKAGES":       "numpy, scipy>=1.11,<2",
			"PYEXEC_NO_DETECT_IMPORTS":   "1",
			"PYEXEC_ALLOW_PACKAGES":      "numpy,scipy",
			"PYEXEC_DENY_PACKAGES":       "torch",
			"PYEXEC_IMPORT_MAP":          "/etc/pyexec/imports.txt",
			"PYEXEC_POLICY_FILE":         "/etc/pyexec/policy.json",
			"PYEXEC_RUFF":                "/opt/ruff",
			"PYEXEC_LINT_IGNORE":         "ignored because the flag wins",
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		e := c.Envs
		base, _ := e.Base()
		if e.Dir != "/srv/envs" || e.MaxBytes != 5<<30 || e.IndexURL != "https://mirror.example/simple" ||
			len(e.ExtraIndexURLs) != 2 || !slices.Equal(e.TrustedHosts, []string{"mirror.example:8443"}) || !e.NoUV ||
			e.InstallTimeout != 90*time.Second || !e.AllowSourceBuilds || !slices.Equal(base, []string{"numpy", "scipy>=1.11,<2"}) ||
			!e.NoDetectImports || !slices.Equal(e.AllowPackages, []string{"numpy", "scipy"}) ||
			!slices.Equal(e.DenyPackages, []string{"torch"}) || e.ImportMapFile != "/etc/pyexec/imports.txt" ||
			e.PolicyFile != "/etc/pyexec/policy.json" || e.Ruff != "/opt/ruff" || !slices.Equal(e.LintIgnore, []string{"E501", "D"}) {
			t.Fatalf("envs = %+v", e)
		}
	})

	dirs := []struct {
		name, dataDir, envDir, want string
	}{
		{name: "under the data dir", dataDir: "/srv/pyexec", want: "/srv/pyexec/envs"},
		{name: "data dir under /tmp falls back", dataDir: "/tmp/x", want: fallbackEnvDir},
		{name: "data dir under /work falls back", dataDir: "/work/data", want: fallbackEnvDir},
		{name: "explicit", dataDir: "/tmp/x", envDir: "/var/cache/envs", want: "/var/cache/envs"},
	}
	for _, tt := range dirs {
		t.Run("env dir "+tt.name, func(t *testing.T) {
			c := Default()
			c.DataDir, c.Envs.Dir = tt.dataDir, tt.envDir
			got, err := c.EnvDir()
			if err != nil || got != tt.want {
				t.Fatalf("EnvDir() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("relative data dir is made absolute", func(t *testing.T) {
		c := Default()
		c.DataDir = "data"
		got, err := c.EnvDir()
		if err != nil || !filepath.IsAbs(got) {
			t.Fatalf("EnvDir() = %q, %v", got, err)
		}
	})
}

func TestValidateEnvs(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{"env dir under /tmp", func(c *Config) { c.Envs.Dir = "/tmp/envs" },
			`PYEXEC_ENV_DIR: "/tmp/envs" is under /tmp, which jails cannot mount; choose a directory outside /tmp, /proc, /dev, /etc and /work, e.g. /var/tmp/pyexec/envs`},
		{"tiny cap", func(c *Config) { c.Envs.MaxBytes = 10 }, "PYEXEC_ENV_MAX_BYTES: must be at least 1MiB, got 10"},
		{"index not a URL", func(c *Config) { c.Envs.IndexURL = "pypi.org" }, `PYEXEC_INDEX_URL: "pypi.org" is not an http(s) or file URL`},
		{"extra index", func(c *Config) { c.Envs.ExtraIndexURLs = []string{"ftp://x"} }, `PYEXEC_EXTRA_INDEX_URLS: "ftp://x" is not an http(s) or file URL`},
		{"trusted host with a path", func(c *Config) { c.Envs.TrustedHosts = []string{"a.example/simple"} }, `PYEXEC_TRUSTED_HOSTS: "a.example/simple" is not a host or host:port`},
		{"install timeout", func(c *Config) { c.Envs.InstallTimeout = 0 }, "PYEXEC_INSTALL_TIMEOUT: must be at least 1s, got 0s"},
		{"source builds without a jail", func(c *Config) { c.Envs.AllowSourceBuilds, c.UnsafeNoIsolation = true, true },
			"PYEXEC_ALLOW_SOURCE_BUILDS: source builds run in a jail, which --unsafe-no-isolation does not have"},
		{"base option", func(c *Config) { c.Envs.BasePackages = "numpy,--pre" }, "PYEXEC_BASE_PACKAGES: "},
		{"allow with a version", func(c *Config) { c.Envs.AllowPackages = []string{"numpy<2"} }, `PYEXEC_ALLOW_PACKAGES: "numpy<2" is not a distribution name`},
		{"lint rule", func(c *Config) { c.Envs.LintIgnore = []string{"e501"} }, `PYEXEC_LINT_IGNORE: "e501" is not ALL, a ruff linter prefix or a rule code`},
		{"no lint rule", func(c *Config) { c.Envs.LintSelect = nil }, "PYEXEC_LINT_SELECT: must select at least one rule (ALL selects every rule)"},
		{"no base", func(c *Config) { c.Envs.BasePackages = "-" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want):
				t.Fatalf("Validate = %v\nwant        %s", err, tt.want)
			}
			if err2 := c.ValidateEnvironments(); (err2 == nil) != (tt.want == "") {
				t.Fatalf("ValidateEnvironments = %v, Validate = %v", err2, err)
			}
		})
	}
}
