// Package config holds the one configuration of `pyexec serve`: every knob
// of the HTTP service and the engine behind it, filled from command-line
// flags and PYEXEC_* environment variables (flags win) and validated once
// at startup. It performs no I/O beyond reading the API keys file, the host
// name (the default node name) and whether the NATS credential and TLS
// files exist, and must never hold process-wide state: callers own the
// Config they load.
package config

import (
	"io"
	"log/slog"
	"runtime"
	"time"
)

// Config is the validated configuration of `pyexec serve`. Sizes are in
// the unit their name says; zero values are not meaningful, so always start
// from Default.
type Config struct {
	Host    string // listen address (PYEXEC_HOST)
	Port    int    // listen port (PYEXEC_PORT)
	DataDir string // embedded store and environments (PYEXEC_DATA_DIR)

	DefaultTimeout  time.Duration // per execution when the request says 0
	MaxTimeout      time.Duration // upper bound a request may ask for
	DefaultMemoryMB int
	MaxMemoryMB     int
	DefaultDiskMB   int
	MaxDiskMB       int

	MaxConcurrency int           // executions running at once
	QueueSize      int           // executions waiting for a slot
	RecordTTL      time.Duration // how long finished records are kept
	// ShutdownTimeout is how long running executions and requests get to
	// finish after SIGTERM/SIGINT before they are stopped (see serve).
	ShutdownTimeout time.Duration
	// StoreMaxBytes caps the shared store; above it the oldest finished
	// executions are evicted. 0: no cap (records only expire).
	StoreMaxBytes int64

	APIKeys      []string // entries "key" or "name:key" (PYEXEC_API_KEYS)
	APIKeysFile  string   // one entry per line; '#' starts a comment
	AllowNetwork bool     // requests may ask for network access
	// AdminKeys names the API keys (by name) that are operators: they see
	// and kill every caller's executions and sessions (PYEXEC_ADMIN_KEYS).
	AdminKeys []string

	// InsecureNoAuth lets a server without API keys listen on a
	// non-loopback address.
	InsecureNoAuth bool
	// UnsafeNoIsolation runs payloads without the jail (development only).
	UnsafeNoIsolation bool
	// CgroupParent names the cgroup, below the server's own, under which
	// every jail gets its cgroup; also what a restart sweeps.
	CgroupParent string

	// WarmPool keeps jails with the interpreter already started, per kind
	// of execution in use; off, every execution builds its jail cold.
	WarmPool bool
	// PoolMaxWarm bounds warm jails of all kinds together; PoolPerKind
	// bounds one kind; PoolIdle is how long an unused kind stays warm.
	PoolMaxWarm int
	PoolPerKind int
	PoolIdle    time.Duration
	// ForkServer builds warm executions by forking a per-kind fork server
	// that preloaded Preload (the modules its environment has), instead
	// of a jail each. It needs a root server; otherwise warm jails are used.
	ForkServer bool
	Preload    []string
	// ForkServers bounds the fork servers running at once (each holds an
	// interpreter with its preloads); a kind beyond them gets warm jails.
	ForkServers int

	MaxBodyMB      int   // request body cap
	MaxOutputBytes int64 // stdout and stderr cap, each

	MaxArchiveFiles     int   // files in an uploaded tar
	MaxArchiveFileBytes int64 // bytes of one file in an uploaded tar
	MaxArchiveBytes     int64 // bytes of all files in an uploaded tar

	MaxCollectFiles int   // files kept from one execution (artifacts)
	MaxCollectBytes int64 // bytes of all files kept from one execution

	LogLevel  string // debug, info, warn, error
	LogFormat string // text or json

	// Envs configures dependency environments and lint.
	Envs Envs
	// Sessions configures stateful sessions.
	Sessions Sessions
	// Preview configures previews of the web apps sessions serve.
	Preview Preview
	// Network configures egress for executions with network.
	Network Network
	// Followers bounds live event streams.
	Followers Followers
	// Fairness bounds what one API key holds of the slots and queue.
	Fairness Fairness
	// Cluster says where the store lives and names this node.
	Cluster Cluster
	// Members tunes how the nodes of a fleet watch each other.
	Members Members

	// flagsGiven holds the flags given on the command line (Resolve), so
	// that a problem names a setting the way the user gave it.
	flagsGiven map[string]bool
}

// Default returns the configuration used when nothing is set: loopback
// only, no network, conservative limits.
func Default() Config {
	return Config{
		Host:                "127.0.0.1",
		Port:                8080,
		DataDir:             "./data",
		DefaultTimeout:      30 * time.Second,
		MaxTimeout:          300 * time.Second,
		DefaultMemoryMB:     256,
		MaxMemoryMB:         2048,
		DefaultDiskMB:       512,
		MaxDiskMB:           4096,
		MaxConcurrency:      runtime.NumCPU(),
		QueueSize:           100,
		RecordTTL:           24 * time.Hour,
		ShutdownTimeout:     30 * time.Second,
		CgroupParent:        "pyexec",
		WarmPool:            true,
		PoolMaxWarm:         8,
		PoolPerKind:         4,
		PoolIdle:            5 * time.Minute,
		ForkServer:          true,
		ForkServers:         4,
		Preload:             []string{"numpy", "pandas", "matplotlib", "matplotlib.pyplot"},
		MaxBodyMB:           50,
		MaxOutputBytes:      10 << 20,
		MaxArchiveFiles:     1000,
		MaxArchiveFileBytes: 10 << 20,
		MaxArchiveBytes:     50 << 20,
		MaxCollectFiles:     100,
		MaxCollectBytes:     64 << 20,
		LogLevel:            "info",
		LogFormat:           "text",
		Envs:                defaultEnvs(),
		Sessions:            defaultSessions(),
		Preview:             defaultPreview(),
		Network:             defaultNetwork(),
		Followers:           defaultFollowers(),
		Cluster:             defaultCluster(),
		Members:             defaultMembers(),
	}
}

// MaxBodyBytes is the request body cap in bytes.
func (c *Config) MaxBodyBytes() int64 { return int64(c.MaxBodyMB) << 20 }

// NewLogger returns a logger writing to w in LogFormat at LogLevel. Call
// it on a validated Config: an unknown level or format is an error there.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel)) // checked by Validate
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
