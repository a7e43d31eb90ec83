package store

import "testing"

// Memory is given back once, at the first quiet check after a burst: not
// during the burst (the writes are still coming), not on a busy server
// that never bursts, and not again until the next burst.
func TestMemoryIsGivenBackWhenABurstGoesQuiet(t *testing.T) {
	const mib = 1 << 20
	m := memoryReturner{last: 1000 * mib}
	var at uint64 = 1000 * mib
	step := func(allocated uint64) bool {
		at += allocated
		return m.observe(at)
	}
	for i, c := range []struct {
		allocated uint64
		give      bool
		why       string
	}{
		{4 * mib, false, "a quiet server"},
		{20 * mib, false, "a busy API, under a burst"},
		{300 * mib, false, "snapshots being written"},
		{200 * mib, false, "still being written"},
		{12 * mib, false, "slowing, but not quiet"},
		{2 * mib, true, "quiet after the burst"},
		{1 * mib, false, "already given back"},
		{0, false, "idle"},
		{64 * mib, false, "a new burst"},
		{0, true, "quiet again"},
	} {
		if got := step(c.allocated); got != c.give {
			t.Errorf("check %d (%s, %d MiB): give back = %v, want %v", i, c.why, c.allocated/mib, got, c.give)
		}
	}
}
