package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestCollectorNeverRemovesAMountedTree: the collector sweeps the trees of
// versions that are no current one (here every tree: no heads, as after
// another node's commit) while runs mount the workspace again and again;
// every mount sees its whole tree. Before the sweep checked and moved a
// tree in one step, a Prepare that counted itself in use between the check
// and the removal mounted a tree being removed (a review probe saw 208 of
// 400 mounts with files missing).
func TestCollectorNeverRemovesAMountedTree(t *testing.T) {
	requireRoot(t)
	m := newLocal(t, Limits{})
	ref := Ref{Name: "w"}
	mustCreate(t, m, alice, "w", 64<<20)
	const n = 1000
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d%d/f%d", i%20, i)] = "x"
	}
	upload(t, m, ref, files)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.gcMu.Lock()
			var st GCStats
			err := m.sweepTrees(map[string]bool{}, &st)
			m.gcMu.Unlock()
			if err != nil {
				t.Errorf("sweep: %v", err)
				return
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	bad := 0
	for i := range 100 {
		mt, err := m.Prepare(ctx, alice, ref, ReadOnly, fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
		time.Sleep(200 * time.Microsecond)
		got := 0
		_ = filepath.WalkDir(mt.Lower, func(_ string, de fs.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				got++
			}
			return nil
		})
		if got != n {
			bad++
			if bad <= 3 {
				t.Errorf("mount %d: its tree holds %d of %d files", i, got, n)
			}
		}
		if err := mt.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if bad > 0 {
		t.Errorf("%d of 100 mounts saw a tree being removed", bad)
	}
}
