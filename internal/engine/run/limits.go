package run

import (
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// Limits are the operator's default limits of a request that leaves them
// zero, and the largest values a request may ask for. Zero fields take
// the defaults documented on each (WithDefaults).
type Limits struct {
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
}

// WithDefaults fills the zero fields of l with their defaults.
func (l Limits) WithDefaults() Limits {
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
	setDur(&l.DefaultTimeout, 30*time.Second)
	setDur(&l.MaxTimeout, 10*time.Minute)
	setInt(&l.DefaultMemoryBytes, 512<<20)
	setInt(&l.MaxMemoryBytes, 4<<30)
	setInt(&l.DefaultDiskBytes, 256<<20)
	setInt(&l.MaxDiskBytes, 4<<30)
	if l.DefaultCPUs == 0 {
		l.DefaultCPUs = 1
	}
	if l.MinCPUs == 0 {
		l.MinCPUs = 0.1
	}
	setInt(&l.OutputBytes, 1<<20)
	return l
}

// Validate reports the first limit that is out of bounds.
func (l Limits) Validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{l.DefaultTimeout < time.Millisecond || l.DefaultTimeout > l.MaxTimeout, "default timeout must be positive and at most the max timeout"},
		{l.DefaultMemoryBytes < 4<<20 || l.DefaultMemoryBytes > l.MaxMemoryBytes, "default memory must be at least 4 MiB and at most the max memory"},
		{l.DefaultDiskBytes < 1<<20 || l.DefaultDiskBytes > l.MaxDiskBytes, "default disk must be at least 1 MiB and at most the max disk"},
		{l.MinCPUs < 0.01 || l.DefaultCPUs < l.MinCPUs, "cpus must be at least 0.01 and the default at least the floor"},
		{l.OutputBytes < 1, "output limit must be positive"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// For maps the request's limits onto the jail's, applying the defaults
// and refusing values above the maximums.
func (l Limits) For(req Request) (sandbox.Limits, error) {
	pick := func(v, def, max int64, what string) (int64, error) {
		switch {
		case v < 0:
			return 0, fmt.Errorf("%s must not be negative", what)
		case v == 0:
			return def, nil
		case v > max:
			return 0, fmt.Errorf("%s %d exceeds the server's limit of %d", what, v, max)
		}
		return v, nil
	}
	timeout, err := pick(int64(req.Timeout), int64(l.DefaultTimeout), int64(l.MaxTimeout), "timeout")
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("timeout %s: %w", req.Timeout, err)
	}
	mem, err := pick(req.MemoryBytes, l.DefaultMemoryBytes, l.MaxMemoryBytes, "memory")
	if err != nil {
		return sandbox.Limits{}, err
	}
	disk, err := pick(req.DiskBytes, l.DefaultDiskBytes, l.MaxDiskBytes, "disk")
	if err != nil {
		return sandbox.Limits{}, err
	}
	if req.CPUShares < 0 {
		return sandbox.Limits{}, fmt.Errorf("cpu_shares must not be negative")
	}
	cpus := l.DefaultCPUs
	if req.CPUShares > 0 {
		cpus = max(float64(req.CPUShares)/1024, l.MinCPUs)
	}
	return sandbox.Limits{
		WallTime:       time.Duration(timeout),
		CPUTime:        time.Duration(timeout),
		MemoryBytes:    mem,
		CPUs:           cpus,
		WorkspaceBytes: disk,
		StdoutBytes:    l.OutputBytes,
		StderrBytes:    l.OutputBytes,
	}, nil
}
