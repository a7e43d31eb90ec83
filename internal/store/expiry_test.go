package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPruneDropsWhatExpiredAndKeepsTheRest writes, rewrites and removes
// keys at random times around the TTL's cutoff, prunes, and compares every
// list and the tally with what the entries left say they must be.
func TestPruneDropsWhatExpiredAndKeepsTheRest(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { pruneAtRandom(t, rand.New(rand.NewPCG(seed, 2))) })
	}
}

func pruneAtRandom(t *testing.T, rng *rand.Rand) {
	ix := newIndex(time.Hour)
	now := time.Now()
	statuses := []string{"running", "completed", "failed"}
	lastWrite := make(map[string]time.Time)
	for i := range 5000 {
		key := fmt.Sprintf("exe_%05d", rng.IntN(3000))
		if rng.IntN(10) == 0 {
			ix.remove(key)
			delete(lastWrite, key)
			continue
		}
		st := statuses[rng.IntN(len(statuses))]
		at := now.Add(-time.Duration(rng.IntN(120)) * time.Minute) // half of them older than the TTL
		ix.put(key, Meta{Status: st, Owner: fmt.Sprint("k", rng.IntN(3)), Final: st != "running"}, uint64(i+1), at)
		lastWrite[key] = at
	}
	ix.pruneExpired()

	for key, at := range lastWrite {
		_, kept := ix.entries[key]
		if expired := !at.After(now.Add(-time.Hour)); kept == expired {
			t.Fatalf("%s last written %v ago: kept %v", key, now.Sub(at).Round(time.Minute), kept)
		}
	}
	want := make(map[string][]string)
	tally := make(map[Meta]int)
	for key, e := range ix.entries {
		for _, sel := range selectorsOf(e.Meta) {
			want[sel] = append(want[sel], key)
		}
		tally[e.Meta]++
	}
	if len(want) != len(ix.lists) {
		t.Errorf("%d lists, want %d", len(ix.lists), len(want))
	}
	for sel, keys := range want {
		slices.Sort(keys)
		if !slices.Equal(ix.lists[sel], keys) {
			t.Errorf("list %q: %d keys, want %d", sel, len(ix.lists[sel]), len(keys))
		}
	}
	for m, n := range tally {
		if ix.tally[m] != n {
			t.Errorf("tally of %+v is %d, want %d", m, ix.tally[m], n)
		}
	}
	if len(ix.tally) != len(tally) {
		t.Errorf("%d tallies, want %d", len(ix.tally), len(tally))
	}
}

// TestPruneRunsOncePerGap: the eviction loop asks often; a prune within
// pruneGap of the last does nothing, the next one after it catches up.
func TestPruneRunsOncePerGap(t *testing.T) {
	ix := newIndex(time.Hour)
	old := time.Now().Add(-2 * time.Hour)
	ix.put("exe_1", Meta{Status: "completed", Final: true}, 1, old)
	ix.pruneExpired()
	ix.put("exe_2", Meta{Status: "completed", Final: true}, 2, old)
	ix.pruneExpired()
	if !ix.has("exe_2") || ix.has("exe_1") {
		t.Fatalf("within the gap: exe_1 kept %v, exe_2 kept %v; want only exe_2", ix.has("exe_1"), ix.has("exe_2"))
	}
	ix.pruned = ix.pruned.Add(-pruneGap)
	ix.pruneExpired()
	if ix.has("exe_2") || len(ix.lists) != 0 || len(ix.queue) != 0 {
		t.Fatalf("after the gap: exe_2 kept %v, %d lists, %d queued", ix.has("exe_2"), len(ix.lists), len(ix.queue))
	}
}

// BenchmarkPruneLargeIndex: one prune of an index of 200,000 live entries
// of which 1% expired, as the eviction loop's rounds would find it.
func BenchmarkPruneLargeIndex(b *testing.B) {
	now := time.Now()
	for b.Loop() {
		b.StopTimer()
		ix := newIndex(time.Hour)
		for i := range 200_000 {
			at := now
			if i < 2000 {
				at = now.Add(-2 * time.Hour)
			}
			ix.put(fmt.Sprintf("exe_%07d", i), Meta{Status: "completed", Owner: "k", Final: true}, uint64(i+1), at)
		}
		b.StartTimer()
		ix.pruneExpired()
	}
}
