package config

import "github.com/spf13/pflag"

// groupAnnotation names the help topic of a flag Bind registered.
const groupAnnotation = "pyexec-group"

// OtherGroup is the topic of a flag missing from the table of groups; a
// test keeps it empty.
const OtherGroup = "Further settings"

// FlagGroup is one topic of `pyexec serve --help`.
type FlagGroup struct {
	Title string
	Flags []string
}

// FlagGroups returns the topics of the serve flags, in the order help
// shows them. It is the one table of them: help reads it through the
// flags' annotations, and a test checks that every flag is in it.
func FlagGroups() []FlagGroup {
	return []FlagGroup{
		{"Listening and access", []string{"host", "port", "api-keys", "api-keys-file", "admin-keys", "insecure-no-auth"}},
		{"Limits of one execution", []string{"default-timeout", "max-timeout", "default-memory-mb", "max-memory-mb",
			"default-disk-mb", "max-disk-mb", "allow-network", "max-output-bytes", "max-body-mb", "max-archive-files",
			"max-archive-file-bytes", "max-archive-bytes", "max-collect-files", "max-collect-bytes"}},
		{"Network egress", []string{"network-allow", "network-deny", "network-policy", "network-default", "network-max-conns",
			"network-max-bytes-out", "network-max-bytes-in", "network-connect-timeout", "network-hosts",
			"secrets-file", "network-ca"}},
		{"Capacity", []string{"max-concurrency", "queue-size", "max-followers", "max-followers-per-key",
			"max-running-per-key", "max-queued-per-key"}},
		{"Sessions", []string{"max-sessions", "max-sessions-per-key", "session-idle-timeout", "max-session-idle-timeout",
			"session-lifetime", "max-session-lifetime", "session-memory-mb", "session-hibernate-after", "session-checkpoint-every", "session-save-timeout",
			"session-hibernations", "snapshot-spools", "snapshot-key", "snapshot-max-bytes",
			"snapshot-quota-bytes", "snapshot-quota"}},
		{"Previews of sessions' web apps", []string{"preview", "preview-ttl", "preview-host", "preview-max-conns", "preview-max-key-conns",
			"preview-max-bytes", "preview-idle-timeout"}},
		{"Workspaces", []string{"workspaces", "workspace-quota-mb", "max-workspace-quota-mb", "workspace-key-quota-mb",
			"max-workspaces-per-key", "max-workspace-entries", "workspace-keep-versions", "workspace-keep-for"}},
		{"Isolation and warm pool", []string{"cgroup-parent", "unsafe-no-isolation", "warm-pool", "pool-max-warm",
			"pool-per-kind", "pool-idle", "fork-server", "fork-servers", "preload"}},
		{"Environments and packages", []string{"env-dir", "env-max-bytes", "index-url", "extra-index-urls", "trusted-hosts",
			"uv", "no-uv", "allow-source-builds", "install-timeout", "base-packages", "prepare-base", "no-detect-imports",
			"allow-packages", "deny-packages", "import-map", "policy-file"}},
		{"Tools and lint", []string{"provision-tools", "tools-dir", "ruff", "lint-select", "lint-ignore"}},
		{"Storage and shutdown", []string{"data-dir", "record-ttl", "store-max-bytes", "shutdown-timeout"}},
		{"Fleet (external NATS)", []string{"nats", "nats-creds", "nats-tls-ca", "nats-tls-cert", "nats-tls-key",
			"nats-replicas", "node-name", "advertise-url", "node-lost-after"}},
		{"Logging", []string{"log-level", "log-format"}},
	}
}

// groupOf returns the topic of the flag called name.
func groupOf(name string) string {
	for _, g := range FlagGroups() {
		for _, f := range g.Flags {
			if f == name {
				return g.Title
			}
		}
	}
	return OtherGroup
}

// GroupOf returns the help topic of f, "" for a flag Bind did not
// register (such as --help).
func GroupOf(f *pflag.Flag) string {
	if g := f.Annotations[groupAnnotation]; len(g) == 1 {
		return g[0]
	}
	return ""
}

// Variable is a PYEXEC_* environment variable that no flag fills.
type Variable struct {
	Name  string
	Usage string
}

// EnvironmentOnly returns the variables serve (and env, and --local) read
// that have no flag, for help to list with the flags.
func EnvironmentOnly() []Variable {
	return []Variable{
		{"PYEXEC_PYTHONS", `interpreters to offer, "version=path" comma separated, e.g. 3.12=/opt/py312/bin/python3 (default: discovered on PATH, /usr/bin, /usr/local/bin, pyenv's and uv's directories)`},
		{"PYEXEC_DEFAULT_PYTHON", "version used when a request names none (default: 3.12 when present, else the newest)"},
		{"PYEXEC_PPROF_ADDR", "serve Go profiles (/debug/pprof/) on this loopback host:port, for measuring (default: off)"},
	}
}
