package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// envAnnotation marks the flags Bind registered and names their variable.
const envAnnotation = "pyexec-env"

// EnvName is the environment variable that fills the flag called name:
// "default-timeout" → "PYEXEC_DEFAULT_TIMEOUT".
func EnvName(flag string) string {
	return "PYEXEC_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Bind registers one flag per field of c on fs, with c's current values as
// defaults; parsing fs writes straight into c.
func (c *Config) Bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.StringVar(&c.Host, "host", c.Host, "address to listen on")
	add("host", "address to listen on; non-loopback needs API keys or --insecure-no-auth")
	fs.IntVar(&c.Port, "port", c.Port, "")
	add("port", "port to listen on")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "")
	add("data-dir", "directory for execution records, queue and environments")

	fs.Var(secondsValue{&c.DefaultTimeout}, "default-timeout", "")
	add("default-timeout", "execution timeout when a request sets none (seconds or a duration like 1m)")
	fs.Var(secondsValue{&c.MaxTimeout}, "max-timeout", "")
	add("max-timeout", "largest timeout a request may ask for")
	fs.IntVar(&c.DefaultMemoryMB, "default-memory-mb", c.DefaultMemoryMB, "")
	add("default-memory-mb", "memory limit in MiB when a request sets none")
	fs.IntVar(&c.MaxMemoryMB, "max-memory-mb", c.MaxMemoryMB, "")
	add("max-memory-mb", "largest memory limit in MiB a request may ask for")
	fs.IntVar(&c.DefaultDiskMB, "default-disk-mb", c.DefaultDiskMB, "")
	add("default-disk-mb", "workspace size in MiB when a request sets none")
	fs.IntVar(&c.MaxDiskMB, "max-disk-mb", c.MaxDiskMB, "")
	add("max-disk-mb", "largest workspace size in MiB a request may ask for")

	fs.IntVar(&c.MaxConcurrency, "max-concurrency", c.MaxConcurrency, "")
	add("max-concurrency", "executions running at once")
	fs.IntVar(&c.QueueSize, "queue-size", c.QueueSize, "")
	add("queue-size", "executions waiting for a slot before requests get 429")
	fs.Var(secondsValue{&c.RecordTTL}, "record-ttl", "")
	add("record-ttl", "how long execution records are kept")
	fs.Var(secondsValue{&c.ShutdownTimeout}, "shutdown-timeout", "")
	add("shutdown-timeout", "on SIGTERM/SIGINT, how long running executions get to finish before they are stopped (failed/node_lost); a second signal stops them at once")
	fs.Var(sizeValue{&c.StoreMaxBytes}, "store-max-bytes", "")
	add("store-max-bytes", "size limit of the stored executions (records, events, artifacts; bytes, or with KiB/MiB/GiB); above it the oldest finished ones are evicted; 0: no limit")
	c.BindIsolation(fs)
	fs.BoolVar(&c.WarmPool, "warm-pool", c.WarmPool, "")
	add("warm-pool", "keep jails with the interpreter started ahead of time (--warm-pool=false: every jail cold)")
	fs.IntVar(&c.PoolMaxWarm, "pool-max-warm", c.PoolMaxWarm, "")
	add("pool-max-warm", "warm jails kept at most, all kinds together")
	fs.IntVar(&c.PoolPerKind, "pool-per-kind", c.PoolPerKind, "")
	add("pool-per-kind", "warm jails kept at most for one kind of execution (interpreter, environment, network)")
	fs.Var(secondsValue{&c.PoolIdle}, "pool-idle", "")
	add("pool-idle", "how long an unused kind of execution stays warm")
	fs.BoolVar(&c.ForkServer, "fork-server", c.ForkServer, "")
	add("fork-server", "build warm executions by forking a per-kind interpreter that preloaded --preload (needs root; --fork-server=false: a jail each)")
	fs.IntVar(&c.ForkServers, "fork-servers", c.ForkServers, "")
	add("fork-servers", "fork servers running at once, all kinds together (each holds an interpreter and its preloads, 20-120 MiB)")
	fs.StringSliceVar(&c.Preload, "preload", c.Preload, "")
	add("preload", "modules a fork server imports once for all its executions, where the environment has them")

	fs.StringSliceVar(&c.APIKeys, "api-keys", c.APIKeys, "")
	add("api-keys", `API keys, comma separated, each "key" or "name:key"`)
	fs.StringVar(&c.APIKeysFile, "api-keys-file", c.APIKeysFile, "")
	add("api-keys-file", "file with one API key entry per line ('#' comments)")
	fs.StringSliceVar(&c.AdminKeys, "admin-keys", c.AdminKeys, "")
	add("admin-keys", "names of API keys that are operators: they see and kill every key's executions and sessions")
	fs.BoolVar(&c.AllowNetwork, "allow-network", c.AllowNetwork, "")
	add("allow-network", "let requests that ask for it have network access")
	fs.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", c.InsecureNoAuth, "")
	add("insecure-no-auth", "allow a non-loopback address without API keys")
	fs.BoolVar(&c.UnsafeNoIsolation, "unsafe-no-isolation", c.UnsafeNoIsolation, "")
	add("unsafe-no-isolation", "run code WITHOUT the jail (development only)")

	fs.IntVar(&c.MaxBodyMB, "max-body-mb", c.MaxBodyMB, "")
	add("max-body-mb", "request body limit in MiB")
	fs.Var(sizeValue{&c.MaxOutputBytes}, "max-output-bytes", "")
	add("max-output-bytes", "stdout and stderr limit each (bytes, or with KiB/MiB/GiB)")
	fs.IntVar(&c.MaxArchiveFiles, "max-archive-files", c.MaxArchiveFiles, "")
	add("max-archive-files", "files allowed in an uploaded tar")
	fs.Var(sizeValue{&c.MaxArchiveFileBytes}, "max-archive-file-bytes", "")
	add("max-archive-file-bytes", "size limit of one file in an uploaded tar")
	fs.Var(sizeValue{&c.MaxArchiveBytes}, "max-archive-bytes", "")
	add("max-archive-bytes", "size limit of all files in an uploaded tar")
	fs.IntVar(&c.MaxCollectFiles, "max-collect-files", c.MaxCollectFiles, "")
	add("max-collect-files", "files an execution may leave behind as downloadable artifacts; more are counted in files_omitted")
	fs.Var(sizeValue{&c.MaxCollectBytes}, "max-collect-bytes", "")
	add("max-collect-bytes", "size limit of all artifacts of one execution")

	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "")
	add("log-level", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "")
	add("log-format", "text or json")

	c.Envs.bind(fs)
	c.Sessions.bind(fs)
	c.Preview.bind(fs)
	c.Network.bind(fs)
	c.Followers.bind(fs)
	c.Fairness.bind(fs)
	c.Cluster.bind(fs)
	c.Members.bind(fs)
}

// BindIsolation registers only the jail's settings that doctor checks
// (--cgroup-parent); Bind includes them.
func (c *Config) BindIsolation(fs *pflag.FlagSet) {
	fs.StringVar(&c.CgroupParent, "cgroup-parent", c.CgroupParent, "")
	describe(fs, "cgroup-parent", "cgroup, below the server's own, that holds the jails' cgroups")
}

// describe sets the usage of the flag name just added to fs and records
// its environment variable and its help topic.
func describe(fs *pflag.FlagSet, name, usage string) {
	env := EnvName(name)
	f := fs.Lookup(name)
	f.Usage = fmt.Sprintf("%s (env %s)", usage, env)
	_ = fs.SetAnnotation(name, envAnnotation, []string{env}) // the flag was just added
	_ = fs.SetAnnotation(name, groupAnnotation, []string{groupOf(name)})
}

// Resolve completes c after fs (on which Bind was called) has been parsed:
// every flag that was not given takes its PYEXEC_* variable from lookupEnv
// when that is set, so flags win over the environment; then the API keys
// file, if any, is read. It does not validate: call Validate next.
func (c *Config) Resolve(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var firstErr error
	c.flagsGiven = map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if f.Changed {
			c.flagsGiven[f.Name] = true
		}
		if firstErr != nil || len(env) != 1 || f.Changed {
			return
		}
		v, ok := lookupEnv(env[0])
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("%s: invalid value %q: %w", env[0], v, flagCause(err))
		}
	})
	if firstErr != nil {
		return firstErr
	}
	if c.APIKeysFile == "" {
		return nil
	}
	entries, err := readKeysFile(c.APIKeysFile)
	if err != nil {
		return fmt.Errorf("PYEXEC_API_KEYS_FILE: %w", err)
	}
	c.APIKeys = append(c.APIKeys, entries...)
	return nil
}

// flagCause reduces a flag parse error to its cause: pflag's wrapper
// repeats the value and names the flag instead of the variable, and
// strconv's repeats the function and the value.
func flagCause(err error) error {
	var inv *pflag.InvalidValueError
	if errors.As(err, &inv) && inv.Unwrap() != nil {
		err = inv.Unwrap()
	}
	var num *strconv.NumError
	if errors.As(err, &num) {
		return num.Err
	}
	return err
}

// readKeysFile returns the non-blank, non-comment lines of path.
func readKeysFile(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading API keys: %w", err)
	}
	var entries []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entries = append(entries, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading API keys from %s: %w", path, err)
	}
	return entries, nil
}
