package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/store"
	"github.com/pyexec/pyexec/internal/workspace"
)

// openWorkspaces opens the node's workspaces under DATA_DIR/workspaces: the
// local disk is their store of record on one node, the cluster's JetStream
// in a fleet (docs/workspaces.md). Runs a predecessor left uncommitted are
// committed before anything else uses them. Nil when they are disabled.
func openWorkspaces(ctx context.Context, cfg config.Config, st *store.NATS, log *slog.Logger) (*workspace.Manager, error) {
	w := cfg.Workspaces
	if !w.Enabled {
		return nil, nil
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	wcfg := workspace.Config{Dir: filepath.Join(data, "workspaces"), Logger: log, Limits: workspace.Limits{
		DefaultQuotaBytes: int64(w.QuotaMB) << 20, MaxQuotaBytes: int64(w.MaxQuotaMB) << 20,
		KeyQuotaBytes: int64(w.KeyQuotaMB) << 20, MaxWorkspaces: w.MaxPerKey, MaxEntries: w.MaxEntries,
		KeepVersions: w.KeepVersions, KeepFor: w.KeepFor}}
	if w.KeepFor == 0 {
		wcfg.Limits.KeepFor = -1 // never by age
	}
	if os.Geteuid() != 0 || cfg.UnsafeNoIsolation {
		// The payload runs as the server's own user: the trees stay its.
		wcfg.UID, wcfg.GID = -1, -1
	}
	var m *workspace.Manager
	if cfg.Cluster.External() {
		// Through the store, as its own buckets: its replicas, reads from
		// the leaders, and waiting while the cluster settles.
		m, err = workspace.OpenFleet(ctx, st, wcfg)
	} else {
		m, err = workspace.OpenLocal(wcfg)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the workspaces: %w", err)
	}
	rec, err := m.Recover(ctx)
	if err != nil {
		return nil, fmt.Errorf("recovering the workspaces' runs: %w", err)
	}
	for _, r := range rec {
		if r.Err != nil {
			log.Warn("a run a previous process left could not be committed", "run", r.Run, "workspace", r.Workspace, "err", r.Err)
		} else {
			log.Info("committed a run a previous process left", "run", r.Run, "workspace", r.Workspace, "version", r.Commit.Version)
		}
	}
	return m, nil
}
