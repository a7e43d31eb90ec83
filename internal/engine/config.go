package engine

import (
	"github.com/pyexec/pyexec/internal/egress"

	"fmt"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"regexp"
	"runtime"
	"time"
)

// Config is the operator's configuration of the engine. Zero fields take
// the defaults documented on each; New validates the result once.
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
}

// nodeName is what a node name may be: a key of the nodes bucket.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (c Config) withDefaults() Config {
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = runtime.NumCPU()
	}
	if c.QueueSize == 0 {
		c.QueueSize = 4 * c.Concurrency
	}
	setDur(&c.DefaultTimeout, 30*time.Second)
	setDur(&c.MaxTimeout, 10*time.Minute)
	setInt(&c.DefaultMemoryBytes, 512<<20)
	setInt(&c.MaxMemoryBytes, 4<<30)
	setInt(&c.DefaultDiskBytes, 256<<20)
	setInt(&c.MaxDiskBytes, 4<<30)
	if c.DefaultCPUs == 0 {
		c.DefaultCPUs = 1
	}
	if c.MinCPUs == 0 {
		c.MinCPUs = 0.1
	}
	setInt(&c.OutputBytes, 1<<20)
	setDur(&c.FlushInterval, 50*time.Millisecond)
	if c.FlushBytes == 0 {
		c.FlushBytes = 16 << 10
	}
	setDur(&c.KillWait, 10*time.Second)
	setDur(&c.EvictInterval, 10*time.Second)
	if c.Node == "" {
		c.Node = "local"
	}
	setDur(&c.NodeLostAfter, DefaultNodeLostAfter)
	return c
}

// maxFlushBytes bounds Config.FlushBytes, the size of an output event.
const maxFlushBytes = 1 << 20

func (c Config) validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Concurrency < 1, "concurrency must be at least 1"},
		{c.QueueSize < 0, "queue size must not be negative"},
		{c.MaxRunningPerKey < 0 || c.MaxQueuedPerKey < 0, "per-key limits must not be negative"},
		{c.AllowNetwork && (c.Network == nil || c.Network.Guard == nil), "network needs an egress configuration with a guard"},
		{c.DefaultTimeout < time.Millisecond || c.DefaultTimeout > c.MaxTimeout, "default timeout must be positive and at most the max timeout"},
		{c.DefaultMemoryBytes < 4<<20 || c.DefaultMemoryBytes > c.MaxMemoryBytes, "default memory must be at least 4 MiB and at most the max memory"},
		{c.DefaultDiskBytes < 1<<20 || c.DefaultDiskBytes > c.MaxDiskBytes, "default disk must be at least 1 MiB and at most the max disk"},
		{c.MinCPUs < 0.01 || c.DefaultCPUs < c.MinCPUs, "cpus must be at least 0.01 and the default at least the floor"},
		{c.OutputBytes < 1, "output limit must be positive"},
		{c.FlushInterval < time.Millisecond || c.FlushBytes < 1, "event flush interval and size must be positive"},
		{c.FlushBytes > maxFlushBytes, "event flush size must be at most 1 MiB"},
		{c.KillWait < 10*time.Millisecond, "kill wait must be at least 10ms"},
		{c.MaxFiles < 0 || c.MaxFileBytes < 0, "file collection limits must not be negative"},
		{c.StoreMaxBytes < 0, "store size limit must not be negative"},
		{c.EvictInterval < 10*time.Millisecond, "eviction interval must be at least 10ms"},
		{!nodeName.MatchString(c.Node), "node name must be 1-128 letters, digits, '-' or '_'"},
		{c.NodeLostAfter < 2*fleet.HeartbeatInterval, "node-lost-after must be at least 4s (two heartbeats)"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("engine config: %s", ch.msg)
		}
	}
	return nil
}
