package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load runs the same steps as `pyexec serve`: defaults, flags, environment.
func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing flags %v: %v", args, err)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	err := c.Resolve(fs, lookup)
	return c, err
}

const goodKey = "0123456789abcdef0123"

func TestResolvePrecedence(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c Config) {
				if c.Host != "127.0.0.1" || c.Port != 8080 || c.DataDir != "./data" {
					t.Errorf("listen defaults = %s:%d %s", c.Host, c.Port, c.DataDir)
				}
				if c.DefaultTimeout != 30*time.Second || c.MaxTimeout != 300*time.Second {
					t.Errorf("timeouts = %v/%v", c.DefaultTimeout, c.MaxTimeout)
				}
				if c.DefaultMemoryMB != 256 || c.MaxMemoryMB != 2048 || c.RecordTTL != 24*time.Hour {
					t.Errorf("memory %d/%d ttl %v", c.DefaultMemoryMB, c.MaxMemoryMB, c.RecordTTL)
				}
				if c.AllowNetwork || c.InsecureNoAuth || c.UnsafeNoIsolation {
					t.Error("a permissive switch is on by default")
				}
			},
		},
		{
			name: "environment fills unset flags",
			env: map[string]string{
				"PYEXEC_PORT": "9090", "PYEXEC_DEFAULT_TIMEOUT": "45", "PYEXEC_RECORD_TTL": "2h",
				"PYEXEC_ALLOW_NETWORK": "true", "PYEXEC_NETWORK_ALLOW": "*.pypi.org,pypi.org:443", "PYEXEC_API_KEYS": "ci:" + goodKey + ",other:" + goodKey + "x",
				"PYEXEC_MAX_OUTPUT_BYTES": "2MiB", "PYEXEC_MAX_COLLECT_FILES": "7", "PYEXEC_MAX_COLLECT_BYTES": "5MiB",
				"PYEXEC_STORE_MAX_BYTES": "2GiB",
			},
			check: func(t *testing.T, c Config) {
				if c.Port != 9090 || c.DefaultTimeout != 45*time.Second || c.RecordTTL != 2*time.Hour {
					t.Errorf("port %d timeout %v ttl %v", c.Port, c.DefaultTimeout, c.RecordTTL)
				}
				if !c.AllowNetwork || len(c.APIKeys) != 2 || c.MaxOutputBytes != 2<<20 {
					t.Errorf("network %v keys %v output %d", c.AllowNetwork, c.APIKeys, c.MaxOutputBytes)
				}
				if c.MaxCollectFiles != 7 || c.MaxCollectBytes != 5<<20 {
					t.Errorf("collect limits %d files %d bytes, want 7 and 5 MiB", c.MaxCollectFiles, c.MaxCollectBytes)
				}
				if c.StoreMaxBytes != 2<<30 {
					t.Errorf("store limit %d, want 2 GiB", c.StoreMaxBytes)
				}
			},
		},
		{
			name: "flags win over environment",
			args: []string{"--port", "7000", "--default-timeout", "1m"},
			env:  map[string]string{"PYEXEC_PORT": "9090", "PYEXEC_DEFAULT_TIMEOUT": "45"},
			check: func(t *testing.T, c Config) {
				if c.Port != 7000 || c.DefaultTimeout != time.Minute {
					t.Errorf("port %d timeout %v, want the flags' 7000 and 1m", c.Port, c.DefaultTimeout)
				}
			},
		},
		{
			name: "the sessions' checkpoints",
			args: []string{"--session-checkpoint-every", "90"},
			check: func(t *testing.T, c Config) {
				if c.Sessions.CheckpointEvery != 90*time.Second {
					t.Errorf("checkpoint every %v, want 1m30s", c.Sessions.CheckpointEvery)
				}
				if d := Default().Sessions.CheckpointEvery; d != time.Minute {
					t.Errorf("the default checkpoint interval is %v, want the documented 1m", d)
				}
			},
		},
		{
			name: "checkpoints off from the environment",
			env:  map[string]string{"PYEXEC_SESSION_CHECKPOINT_EVERY": "0"},
			check: func(t *testing.T, c Config) {
				if c.Sessions.CheckpointEvery != 0 {
					t.Errorf("checkpoint every %v, want 0 (off)", c.Sessions.CheckpointEvery)
				}
			},
		},
		{
			name: "the sessions' saves and reads",
			args: []string{"--session-save-timeout", "30", "--snapshot-spools", "4"},
			env:  map[string]string{"PYEXEC_SESSION_HIBERNATIONS": "3"},
			check: func(t *testing.T, c Config) {
				if s := c.Sessions; s.SaveTimeout != 30*time.Second || s.SnapshotSpools != 4 || s.Hibernations != 3 {
					t.Errorf("save timeout %v, spools %d, hibernations %d; want 30s, 4, 3", s.SaveTimeout, s.SnapshotSpools, s.Hibernations)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestResolveRejectsBadEnvironment(t *testing.T) {
	tests := []struct {
		name, env, value, want string
	}{
		{"port not a number", "PYEXEC_PORT", "eighty", `PYEXEC_PORT: invalid value "eighty": invalid syntax`},
		{"bool", "PYEXEC_ALLOW_NETWORK", "maybe", `PYEXEC_ALLOW_NETWORK: invalid value "maybe": invalid syntax`},
		{"timeout", "PYEXEC_MAX_TIMEOUT", "soon", `PYEXEC_MAX_TIMEOUT: invalid value "soon": want whole seconds or a duration such as 90s, 5m, 24h`},
		{"size", "PYEXEC_MAX_ARCHIVE_BYTES", "10 parsecs", `PYEXEC_MAX_ARCHIVE_BYTES: invalid value "10 parsecs": want a number of bytes, optionally with KiB, MiB or GiB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, nil, map[string]string{tt.env: tt.value})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestKeysFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	body := "# operators\nalice:" + goodKey + "\n\n  " + goodKey + "zz  \n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(t, []string{"--api-keys-file", path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Name != "alice" || keys[0].Secret != goodKey ||
		!strings.HasPrefix(keys[1].Name, "key-") || keys[1].Secret != goodKey+"zz" {
		t.Fatalf("keys = %+v", keys)
	}
	if strings.Contains(keys[1].String(), goodKey) {
		t.Error("APIKey.String shows the secret")
	}

	_, err = load(t, []string{"--api-keys-file", filepath.Join(t.TempDir(), "missing")}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "PYEXEC_API_KEYS_FILE: reading API keys: ") {
		t.Fatalf("missing file: error = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string // the whole message; "" means valid
	}{
		{"port zero", func(c *Config) { c.Port = 0 }, "PYEXEC_PORT: must be 1-65535, got 0"},
		{"port too big", func(c *Config) { c.Port = 70000 }, "PYEXEC_PORT: must be 1-65535, got 70000"},
		{"host with port", func(c *Config) { c.Host = "127.0.0.1:80" }, `PYEXEC_HOST: must be an IP address or host name without a port, got "127.0.0.1:80"`},
		{"empty host", func(c *Config) { c.Host = "" }, "PYEXEC_HOST: must not be empty (use 0.0.0.0 to listen on every interface)"},
		{"max timeout below default", func(c *Config) { c.MaxTimeout = 10 * time.Second },
			"PYEXEC_MAX_TIMEOUT: must be at least PYEXEC_DEFAULT_TIMEOUT (30s), got 10s"},
		{"zero timeout", func(c *Config) { c.DefaultTimeout = 0; c.MaxTimeout = 0 },
			"PYEXEC_DEFAULT_TIMEOUT: must be at least 1s, got 0s"},
		{"tiny memory", func(c *Config) { c.DefaultMemoryMB = 8 }, "PYEXEC_DEFAULT_MEMORY_MB: must be at least 16, got 8"},
		{"max memory below default", func(c *Config) { c.MaxMemoryMB = 128 },
			"PYEXEC_MAX_MEMORY_MB: must be at least PYEXEC_DEFAULT_MEMORY_MB (256), got 128"},
		{"no concurrency", func(c *Config) { c.MaxConcurrency = 0 }, "PYEXEC_MAX_CONCURRENCY: must be at least 1, got 0"},
		{"empty queue", func(c *Config) { c.QueueSize = 0 }, "PYEXEC_QUEUE_SIZE: must be at least 1, got 0"},
		{"short ttl", func(c *Config) { c.RecordTTL = time.Second }, "PYEXEC_RECORD_TTL: must be at least 1m0s, got 1s"},
		{"endless shutdown", func(c *Config) { c.ShutdownTimeout = 2 * time.Hour }, "PYEXEC_SHUTDOWN_TIMEOUT: must be 0-1h0m0s, got 2h0m0s"},
		{"tiny store", func(c *Config) { c.StoreMaxBytes = 1 << 20 }, "PYEXEC_STORE_MAX_BYTES: must be 0 (no limit) or at least 67108864, got 1048576"},
		{"zero body", func(c *Config) { c.MaxBodyMB = 0 }, "PYEXEC_MAX_BODY_MB: must be at least 1, got 0"},
		{"archive total below per file", func(c *Config) { c.MaxArchiveBytes = 10 },
			"PYEXEC_MAX_ARCHIVE_BYTES: must be at least PYEXEC_MAX_ARCHIVE_FILE_BYTES (10485760), got 10"},
		{"no artifacts", func(c *Config) { c.MaxCollectFiles = 0 }, "PYEXEC_MAX_COLLECT_FILES: must be at least 1, got 0"},
		{"no artifact bytes", func(c *Config) { c.MaxCollectBytes = 0 }, "PYEXEC_MAX_COLLECT_BYTES: must be at least 1, got 0"},
		{"workspace quota above the max", func(c *Config) { c.Workspaces.QuotaMB = 1 << 20 },
			"PYEXEC_WORKSPACE_QUOTA_MB: must be at least 1 and at most PYEXEC_MAX_WORKSPACE_QUOTA_MB (16384), got 1048576"},
		{"key quota below a workspace's", func(c *Config) { c.Workspaces.KeyQuotaMB = 10 },
			"PYEXEC_WORKSPACE_KEY_QUOTA_MB: must be 0 (no cap) or at least PYEXEC_WORKSPACE_QUOTA_MB (1024), got 10"},
		{"no versions kept", func(c *Config) { c.Workspaces.KeepVersions = 0 },
			"PYEXEC_WORKSPACE_KEEP_VERSIONS: must be at least 1, got 0"},
		{"workspaces per key", func(c *Config) { c.Workspaces.MaxPerKey = 0 },
			"PYEXEC_MAX_WORKSPACES_PER_KEY: must be at least 1, got 0"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, `PYEXEC_LOG_LEVEL: must be debug, info, warn or error, got "loud"`},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, `PYEXEC_LOG_FORMAT: must be text or json, got "xml"`},
		{"short key", func(c *Config) { c.APIKeys = []string{"ci:short"} },
			`PYEXEC_API_KEYS: API key "ci" is 5 characters long; at least 16 are required`},
		{"duplicate key name", func(c *Config) { c.APIKeys = []string{"ci:" + goodKey, "ci:" + goodKey + "2"} },
			`PYEXEC_API_KEYS: API key name "ci" is used twice`},
		{"public without keys", func(c *Config) { c.Host = "0.0.0.0" },
			"PYEXEC_HOST: 0.0.0.0 is not a loopback address and no API key is configured; set PYEXEC_API_KEYS or PYEXEC_API_KEYS_FILE, or PYEXEC_INSECURE_NO_AUTH=true to serve without authentication"},
		{"public name without keys", func(c *Config) { c.Host = "example.internal" },
			"PYEXEC_HOST: example.internal is not a loopback address and no API key is configured; set PYEXEC_API_KEYS or PYEXEC_API_KEYS_FILE, or PYEXEC_INSECURE_NO_AUTH=true to serve without authentication"},
		{"public with keys", func(c *Config) { c.Host = "0.0.0.0"; c.APIKeys = []string{goodKey} }, ""},
		{"admin key", func(c *Config) {
			c.APIKeys = []string{"ops:" + goodKey, "ci:" + goodKey + "2"}
			c.AdminKeys = []string{"ops"}
		}, ""},
		{"admin key not configured", func(c *Config) { c.APIKeys = []string{"ci:" + goodKey}; c.AdminKeys = []string{"opz"} },
			`PYEXEC_ADMIN_KEYS: "opz" is not the name of a configured API key`},
		{"reserved key name", func(c *Config) { c.APIKeys = []string{"anonymous:" + goodKey} },
			`PYEXEC_API_KEYS: API key name "anonymous" is reserved for the caller of a server without keys`},
		{"admin keys without keys", func(c *Config) { c.AdminKeys = []string{"ops"} },
			"PYEXEC_ADMIN_KEYS: names operator keys but no API key is configured (PYEXEC_API_KEYS)"},
		{"public insecure", func(c *Config) { c.Host = "::"; c.InsecureNoAuth = true }, ""},
		{"localhost without keys", func(c *Config) { c.Host = "localhost" }, ""},
		{"ipv6 loopback without keys", func(c *Config) { c.Host = "::1" }, ""},
		{"no save time", func(c *Config) { c.Sessions.SaveTimeout = 0 }, "PYEXEC_SESSION_SAVE_TIMEOUT: must be at least 1s, got 0s"},
		{"negative checkpoint interval", func(c *Config) { c.Sessions.CheckpointEvery = -time.Second },
			"PYEXEC_SESSION_CHECKPOINT_EVERY: must not be negative, got -1s"},
		{"no spools", func(c *Config) { c.Sessions.SnapshotSpools = 0 },
			"PYEXEC_SESSION_HIBERNATIONS: must be at least 1 (and PYEXEC_SNAPSHOT_SPOOLS too), got 2 and 0"},
		{"two problems at once", func(c *Config) { c.Port = 0; c.QueueSize = -1 },
			"PYEXEC_PORT: must be 1-65535, got 0\nPYEXEC_QUEUE_SIZE: must be at least 1, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("Validate = %v\nwant        %s", err, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1024", 1024}, {"2KiB", 2048}, {"3M", 3 << 20}, {"1 GiB", 1 << 30}, {"7B", 7},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			if back, err := parseSize(formatSize(got)); err != nil || back != got {
				t.Fatalf("formatSize(%d) = %q does not parse back", got, formatSize(got))
			}
		})
	}
}

// Every serve flag has a help topic and every flag of the topics exists.
func TestEveryFlagHasATopic(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.Bind(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if GroupOf(f) == OtherGroup {
			t.Errorf("--%s is in no topic of FlagGroups", f.Name)
		}
	})
	for _, g := range FlagGroups() {
		for _, name := range g.Flags {
			if fs.Lookup(name) == nil {
				t.Errorf("topic %q names --%s, which serve does not have", g.Title, name)
			}
		}
	}
}
