package engine

import (
	"errors"
	"regexp"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/run"
)

// Config is the operator's configuration of the engine. Zero fields take
// the defaults documented on each; New validates the result once, each
// part (admission, run, executions, sessions, fleet) the fields it owns.
type Config struct {
	// Concurrency bounds the executions running at once on this node.
	// Default: runtime.NumCPU().
	Concurrency int
	// QueueSize bounds the executions admitted but not yet running (sync
	// callers waiting for a slot plus queued async jobs). Default: 4 ×
	// Concurrency. Beyond Concurrency+QueueSize, requests get ErrOverloaded.
	QueueSize int
	// MaxRunningPerKey bounds the executions of one caller (API key)
	// running at once across the fleet, MaxQueuedPerKey those waiting for
	// a slot; beyond the latter, ErrOverloaded. Zero: no bound beyond
	// Concurrency and QueueSize. Slots go to callers in turn either way.
	MaxRunningPerKey, MaxQueuedPerKey int
	// Fleet says that other nodes share the store (pyexec serve --nats).
	// A single node (false, the embedded server) may take back at start
	// the queued jobs a previous run of it took and did not start; in a
	// fleet those may be live nodes' jobs, so they come back only after
	// the queue's ack wait.
	Fleet bool
	// AllowNetwork lets requests ask for network access. Off by default:
	// a request that asks is rejected.
	AllowNetwork bool
	// Network is the egress every execution with network goes through:
	// the operator's policy, the always-denied guard, the resolver and
	// the limits. Required with AllowNetwork.
	Network *egress.Config
	// Secrets are the operator's secrets (--secrets-file) executions of
	// the keys each names may ask for; nil: none.
	Secrets *egress.LiveCatalog
	// TrustBundle is the host file of roots jails whose egress terminates
	// TLS trust (run.Config.TrustBundle); "": none.
	TrustBundle string

	// Default limits of a request that leaves them zero, and the largest
	// values a request may ask for.
	DefaultTimeout     time.Duration // default 30s
	MaxTimeout         time.Duration // default 10m
	DefaultMemoryBytes int64         // default 512 MiB
	MaxMemoryBytes     int64         // default 4 GiB
	DefaultDiskBytes   int64         // default 256 MiB
	MaxDiskBytes       int64         // default 4 GiB
	DefaultCPUs        float64       // without cpu_shares; default 1
	MinCPUs            float64       // floor of cpu_shares/1024; default 0.1
	// OutputBytes caps stdout and stderr each; more fails the execution
	// with reason output_limit. Default 1 MiB.
	OutputBytes int64

	// FlushInterval and FlushBytes coalesce live output into events: a
	// chunk is published every FlushInterval or once FlushBytes are
	// pending. FlushBytes is also the most one stdout or stderr event
	// carries, which bounds what a follower holds. Defaults 50ms and
	// 16 KiB (with 32 KiB, 60 followers of a loud execution cost about
	// 10 MiB more peak RSS, see bench/followers); FlushBytes at most 1 MiB.
	FlushInterval time.Duration
	FlushBytes    int
	// MaxFiles and MaxFileBytes cap the files collected from one
	// execution (count, total bytes); zero means the jail's defaults
	// (sandbox.DefaultCollectFiles, sandbox.DefaultCollectBytes).
	MaxFiles     int
	MaxFileBytes int64
	// KillWait bounds how long Kill waits for the node running an
	// execution to stop it and record the outcome. Default 10s.
	KillWait time.Duration
	// Sessions configures stateful sessions (session_types.go).
	Sessions SessionConfig
	// Snapshots configures sessions' snapshots: the server's key, the
	// size cap, each key's quota, the spool directory (engine/snapshots).
	// Used with Deps.Snapshots.
	Snapshots SnapshotConfig
	// Preview turns on previews of the web apps sessions serve
	// (previews.go).
	Preview PreviewConfig
	// StoreMaxBytes caps what the shared store holds (records, index,
	// events, request payloads, artifacts); above it the oldest finished
	// executions are evicted (evict.go). Zero: no cap, records only expire.
	StoreMaxBytes int64
	// EvictInterval is how often the store is measured (also after every
	// execution that ends). Default 10s.
	EvictInterval time.Duration

	// Node names this server in a fleet, unique among the nodes that
	// share a store; the record of every execution it runs says so
	// (Execution.Node), and its heartbeat is stored under it (internal/engine/fleet).
	// Default "local".
	Node string
	// Version is the build's version, told in the node's heartbeat.
	Version string
	// NodeLostAfter is how long a node may write no heartbeat before the
	// others declare it lost and fail its unfinished executions with
	// reason node_lost. Default 10s; at least twice the heartbeat
	// interval (2s).
	NodeLostAfter time.Duration
	// URL is this node's API as the fleet's other nodes reach it
	// (--advertise-url), told in its heartbeat.
	URL string
}

// nodeName is what a node name may be: a key of the nodes bucket.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// withDefaults names the node "local" unless it has a name; the parts
// apply the other defaults (each New).
func (c Config) withDefaults() Config {
	if c.Node == "" {
		c.Node = "local"
	}
	return c
}

// validate checks what no single part owns; each part checks its own
// fields when it is built.
func (c Config) validate() error {
	if !nodeName.MatchString(c.Node) {
		return errors.New("engine config: node name must be 1-128 letters, digits, '-' or '_'")
	}
	return nil
}

// runConfig is what a run may be.
func (c Config) runConfig() run.Config {
	return run.Config{
		Limits: run.Limits{DefaultTimeout: c.DefaultTimeout, MaxTimeout: c.MaxTimeout,
			DefaultMemoryBytes: c.DefaultMemoryBytes, MaxMemoryBytes: c.MaxMemoryBytes,
			DefaultDiskBytes: c.DefaultDiskBytes, MaxDiskBytes: c.MaxDiskBytes,
			DefaultCPUs: c.DefaultCPUs, MinCPUs: c.MinCPUs, OutputBytes: c.OutputBytes},
		AllowNetwork: c.AllowNetwork, Network: c.Network, Secrets: c.Secrets, TrustBundle: c.TrustBundle, MaxFiles: c.MaxFiles, MaxFileBytes: c.MaxFileBytes,
	}
}
