//go:build linux

package main

import (
	"testing"

	"github.com/pyexec/pyexec/internal/config"
)

// TestHibernationBoundFitsTheSessions: a key's hibernation snapshots may
// take at least as much as all the sessions it may hold on a node, each
// as large as a snapshot may be, so that they can all hibernate and be
// saved at a restart; never less than the key's own quota.
func TestHibernationBoundFitsTheSessions(t *testing.T) {
	for _, tt := range []struct {
		perKey, quota    int
		maxBytes, quotaB int64
		wantBytes        int64
		wantCount        int
	}{
		{perKey: 8, quota: 50, maxBytes: 1 << 30, quotaB: 4 << 30, wantBytes: 8 << 30, wantCount: 50},
		{perKey: 2, quota: 1, maxBytes: 1 << 20, quotaB: 4 << 30, wantBytes: 4 << 30, wantCount: 2},
	} {
		cfg := config.Default()
		cfg.DataDir = t.TempDir()
		cfg.Sessions.MaxPerKey, cfg.Sessions.SnapshotQuota = tt.perKey, tt.quota
		cfg.Sessions.SnapshotMaxBytes, cfg.Sessions.SnapshotQuotaBytes = tt.maxBytes, tt.quotaB
		c, err := snapshotConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.HibernationBytes != tt.wantBytes || c.HibernationCount != tt.wantCount {
			t.Errorf("%d sessions a key, snapshots of at most %d bytes, quota %d / %d bytes: hibernations bounded at %d / %d bytes, want %d / %d",
				tt.perKey, tt.maxBytes, tt.quota, tt.quotaB, c.HibernationCount, c.HibernationBytes, tt.wantCount, tt.wantBytes)
		}
	}
}
