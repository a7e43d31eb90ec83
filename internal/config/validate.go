package config

import (
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"strings"
	"time"
)

// Lower bounds below which a limit is a mistake rather than a choice.
const (
	minTimeout   = time.Second
	minMemoryMB  = 16
	minRecordTTL = time.Minute
	// maxShutdownTimeout keeps a stop bounded: supervisors kill what does
	// not stop within their own timeout (systemd's default is 90s).
	maxShutdownTimeout = time.Hour
	// minStoreBytes keeps a store limit above what a few executions with
	// full output take.
	minStoreBytes = 64 << 20
)

// envMention finds the variables a problem's text names.
var envMention = regexp.MustCompile(`PYEXEC_[A-Z0-9_]+`)

// problem is a configuration error about env's setting. A setting the
// user gave as a flag is named by that flag, as typed, then its variable,
// and the other settings the text mentions by their flags:
// "--allow-network (PYEXEC_ALLOW_NETWORK): needs an allow list
// (--network-allow or --network-policy)". One given by its variable, or
// not at all, is named by variables only.
func (c *Config) problem(env, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	flag := flagName(env)
	if !c.flagsGiven[flag] {
		return fmt.Errorf("%s: %s", env, msg)
	}
	msg = envMention.ReplaceAllStringFunc(msg, func(v string) string {
		for _, only := range EnvironmentOnly() {
			if only.Name == v {
				return v
			}
		}
		return "--" + flagName(v)
	})
	return fmt.Errorf("--%s (%s): %s", flag, env, msg)
}

// flagName is the flag of variable env: PYEXEC_ALLOW_NETWORK →
// allow-network (the inverse of EnvName).
func flagName(env string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "PYEXEC_"), "_", "-"))
}

// ValidateIsolation checks only the settings BindIsolation registers.
func (c *Config) ValidateIsolation() error {
	var errs []error
	c.validateIsolation(func(env, format string, args ...any) {
		errs = append(errs, c.problem(env, format, args...))
	})
	return errors.Join(errs...)
}

func (c *Config) validateIsolation(bad func(env, format string, args ...any)) {
	if p := c.CgroupParent; p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.Contains(p, "..") {
		bad("PYEXEC_CGROUP_PARENT", "must be a clean relative cgroup path without \"..\", got %q", p)
	}
}

// Validate checks every field and returns all problems at once, each
// naming its setting as the user gave it (see problem): "PYEXEC_PORT:
// must be 1-65535, got 0", or "--port (PYEXEC_PORT): …" after --port.
// It enforces the security rule that a server without API keys listens on
// loopback only unless InsecureNoAuth is set.
func (c *Config) Validate() error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, c.problem(env, format, args...))
	}

	hostErr := checkHost(c.Host)
	if hostErr != nil {
		bad("PYEXEC_HOST", "%v", hostErr)
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("PYEXEC_PORT", "must be 1-65535, got %d", c.Port)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("PYEXEC_DATA_DIR", "must not be empty")
	}
	if c.PoolMaxWarm < 0 || c.PoolPerKind < 1 || c.PoolPerKind > 64 {
		bad("PYEXEC_POOL_PER_KIND", "must be 1-64 (and PYEXEC_POOL_MAX_WARM not negative), got %d and %d", c.PoolPerKind, c.PoolMaxWarm)
	}
	if c.ForkServers < 1 || c.ForkServers > 64 {
		bad("PYEXEC_FORK_SERVERS", "must be 1-64, got %d", c.ForkServers)
	}
	if c.ShutdownTimeout < 0 || c.ShutdownTimeout > maxShutdownTimeout {
		bad("PYEXEC_SHUTDOWN_TIMEOUT", "must be 0-%v, got %v", maxShutdownTimeout, c.ShutdownTimeout)
	}
	if c.PoolIdle < time.Second {
		bad("PYEXEC_POOL_IDLE", "must be at least 1s, got %v", c.PoolIdle)
	}
	c.validateIsolation(bad)

	if c.DefaultTimeout < minTimeout {
		bad("PYEXEC_DEFAULT_TIMEOUT", "must be at least %v, got %v", minTimeout, c.DefaultTimeout)
	}
	if c.MaxTimeout < c.DefaultTimeout {
		bad("PYEXEC_MAX_TIMEOUT", "must be at least PYEXEC_DEFAULT_TIMEOUT (%v), got %v", c.DefaultTimeout, c.MaxTimeout)
	}
	if c.DefaultMemoryMB < minMemoryMB {
		bad("PYEXEC_DEFAULT_MEMORY_MB", "must be at least %d, got %d", minMemoryMB, c.DefaultMemoryMB)
	}
	if c.MaxMemoryMB < c.DefaultMemoryMB {
		bad("PYEXEC_MAX_MEMORY_MB", "must be at least PYEXEC_DEFAULT_MEMORY_MB (%d), got %d", c.DefaultMemoryMB, c.MaxMemoryMB)
	}
	if c.DefaultDiskMB < 1 {
		bad("PYEXEC_DEFAULT_DISK_MB", "must be at least 1, got %d", c.DefaultDiskMB)
	}
	if c.MaxDiskMB < c.DefaultDiskMB {
		bad("PYEXEC_MAX_DISK_MB", "must be at least PYEXEC_DEFAULT_DISK_MB (%d), got %d", c.DefaultDiskMB, c.MaxDiskMB)
	}

	if c.MaxConcurrency < 1 {
		bad("PYEXEC_MAX_CONCURRENCY", "must be at least 1, got %d", c.MaxConcurrency)
	}
	if c.QueueSize < 1 {
		bad("PYEXEC_QUEUE_SIZE", "must be at least 1, got %d", c.QueueSize)
	}
	if c.RecordTTL < minRecordTTL {
		bad("PYEXEC_RECORD_TTL", "must be at least %v, got %v", minRecordTTL, c.RecordTTL)
	}

	if c.MaxBodyMB < 1 {
		bad("PYEXEC_MAX_BODY_MB", "must be at least 1, got %d", c.MaxBodyMB)
	}
	if c.StoreMaxBytes != 0 && c.StoreMaxBytes < minStoreBytes {
		bad("PYEXEC_STORE_MAX_BYTES", "must be 0 (no limit) or at least %d, got %d", minStoreBytes, c.StoreMaxBytes)
	}
	if c.MaxOutputBytes < 1 {
		bad("PYEXEC_MAX_OUTPUT_BYTES", "must be at least 1, got %d", c.MaxOutputBytes)
	}
	if c.MaxArchiveFiles < 1 {
		bad("PYEXEC_MAX_ARCHIVE_FILES", "must be at least 1, got %d", c.MaxArchiveFiles)
	}
	if c.MaxArchiveFileBytes < 1 {
		bad("PYEXEC_MAX_ARCHIVE_FILE_BYTES", "must be at least 1, got %d", c.MaxArchiveFileBytes)
	}
	if c.MaxArchiveBytes < c.MaxArchiveFileBytes {
		bad("PYEXEC_MAX_ARCHIVE_BYTES", "must be at least PYEXEC_MAX_ARCHIVE_FILE_BYTES (%d), got %d", c.MaxArchiveFileBytes, c.MaxArchiveBytes)
	}
	if c.MaxCollectFiles < 1 {
		bad("PYEXEC_MAX_COLLECT_FILES", "must be at least 1, got %d", c.MaxCollectFiles)
	}
	if c.MaxCollectBytes < 1 {
		bad("PYEXEC_MAX_COLLECT_BYTES", "must be at least 1, got %d", c.MaxCollectBytes)
	}

	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("PYEXEC_LOG_LEVEL", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("PYEXEC_LOG_FORMAT", "must be text or json, got %q", c.LogFormat)
	}

	c.validateEnvs(bad)
	c.validateSessions(bad)
	c.validatePreview(bad)
	c.validateNetwork(bad)
	c.validateFollowers(bad)
	c.validateFairness(bad)
	c.validateCluster(bad)
	c.validateMembers(bad)

	keys, err := c.Keys()
	if err != nil {
		bad("PYEXEC_API_KEYS", "%v", err)
	}
	if err == nil {
		if err := checkAdmins(c.AdminKeys, keys); err != nil {
			bad("PYEXEC_ADMIN_KEYS", "%v", err)
		}
	}
	if err == nil && hostErr == nil && len(keys) == 0 && !c.InsecureNoAuth && !isLoopback(c.Host) {
		bad("PYEXEC_HOST", "%s is not a loopback address and no API key is configured; "+
			"set PYEXEC_API_KEYS or PYEXEC_API_KEYS_FILE, or PYEXEC_INSECURE_NO_AUTH=true to serve without authentication", c.Host)
	}
	return errors.Join(errs...)
}

// checkHost accepts an IP address or a DNS name, without a port.
func checkHost(host string) error {
	if host == "" {
		return errors.New("must not be empty (use 0.0.0.0 to listen on every interface)")
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	for _, r := range host {
		ok := r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !ok {
			return fmt.Errorf("must be an IP address or host name without a port, got %q", host)
		}
	}
	return nil
}

// isLoopback reports whether host certainly means this machine only.
// Other names are not resolved: a name that might not be loopback is not.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is the host:port the server listens on.
func (c *Config) Addr() string {
	return net.JoinHostPort(c.Host, fmt.Sprint(c.Port))
}
