package config

import (
	"time"

	"github.com/spf13/pflag"
)

// Workspaces configures named workspaces (POST /api/v1/workspaces,
// config.workspace on executions, workspace on sessions): files that
// outlive a run, kept under DATA_DIR/workspaces (docs/workspaces.md).
type Workspaces struct {
	// Enabled serves workspaces. Mounting one into a run needs the jail
	// as root; without it the routes work and a run asking for one gets a
	// 501.
	Enabled bool
	// QuotaMB is a workspace's quota when its creation asks for none;
	// MaxQuotaMB the largest one may ask for. KeyQuotaMB caps all of a
	// key's workspaces together (16 GiB; 0: no cap beyond each workspace's,
	// which lets one key claim MaxPerKey times MaxQuotaMB of the disk).
	QuotaMB, MaxQuotaMB, KeyQuotaMB int
	// MaxPerKey bounds the workspaces of one key; MaxEntries the files,
	// directories and links of one workspace.
	MaxPerKey, MaxEntries int
	// KeepVersions is how many versions of a workspace are kept, the
	// current one included; KeepFor drops a replaced version older than
	// that (0: never by age).
	KeepVersions int
	KeepFor      time.Duration
}

func defaultWorkspaces() Workspaces {
	return Workspaces{Enabled: true, QuotaMB: 1024, MaxQuotaMB: 16 << 10, KeyQuotaMB: 16 << 10, MaxPerKey: 100, MaxEntries: 100_000,
		KeepVersions: 20, KeepFor: 30 * 24 * time.Hour}
}

func (w *Workspaces) bind(fs *pflag.FlagSet) {
	add := func(name, usage string) { describe(fs, name, usage) }
	fs.BoolVar(&w.Enabled, "workspaces", w.Enabled, "")
	add("workspaces", "serve named workspaces, kept under DATA_DIR/workspaces (false: the routes answer 404 and runs cannot ask for one)")
	fs.IntVar(&w.QuotaMB, "workspace-quota-mb", w.QuotaMB, "")
	add("workspace-quota-mb", "quota in MiB of a workspace created without one")
	fs.IntVar(&w.MaxQuotaMB, "max-workspace-quota-mb", w.MaxQuotaMB, "")
	add("max-workspace-quota-mb", "largest quota in MiB a workspace may ask for")
	fs.IntVar(&w.KeyQuotaMB, "workspace-key-quota-mb", w.KeyQuotaMB, "")
	add("workspace-key-quota-mb", "MiB all workspaces of one API key may hold together (0: no cap beyond each workspace's)")
	fs.IntVar(&w.MaxPerKey, "max-workspaces-per-key", w.MaxPerKey, "")
	add("max-workspaces-per-key", "workspaces one API key may have")
	fs.IntVar(&w.MaxEntries, "max-workspace-entries", w.MaxEntries, "")
	add("max-workspace-entries", "files, directories and links one workspace may hold")
	fs.IntVar(&w.KeepVersions, "workspace-keep-versions", w.KeepVersions, "")
	add("workspace-keep-versions", "versions of a workspace kept, the current one included")
	fs.Var(secondsValue{&w.KeepFor}, "workspace-keep-for", "")
	add("workspace-keep-for", "a replaced version of a workspace is dropped after this long (0: only by count)")
}

func (c *Config) validateWorkspaces(bad func(env, format string, args ...any)) {
	w := c.Workspaces
	if w.QuotaMB < 1 || w.QuotaMB > w.MaxQuotaMB {
		bad("PYEXEC_WORKSPACE_QUOTA_MB", "must be at least 1 and at most PYEXEC_MAX_WORKSPACE_QUOTA_MB (%d), got %d", w.MaxQuotaMB, w.QuotaMB)
	}
	if w.KeyQuotaMB < 0 || (w.KeyQuotaMB > 0 && w.KeyQuotaMB < w.QuotaMB && w.QuotaMB <= w.MaxQuotaMB) {
		bad("PYEXEC_WORKSPACE_KEY_QUOTA_MB", "must be 0 (no cap) or at least PYEXEC_WORKSPACE_QUOTA_MB (%d), got %d", w.QuotaMB, w.KeyQuotaMB)
	}
	if w.MaxPerKey < 1 {
		bad("PYEXEC_MAX_WORKSPACES_PER_KEY", "must be at least 1, got %d", w.MaxPerKey)
	}
	if w.MaxEntries < 1 {
		bad("PYEXEC_MAX_WORKSPACE_ENTRIES", "must be at least 1, got %d", w.MaxEntries)
	}
	if w.KeepVersions < 1 {
		bad("PYEXEC_WORKSPACE_KEEP_VERSIONS", "must be at least 1, got %d", w.KeepVersions)
	}
	if w.KeepFor < 0 {
		bad("PYEXEC_WORKSPACE_KEEP_FOR", "must not be negative, got %v", w.KeepFor)
	}
}
