package store

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The embedded server keeps what it writes in 8 MiB block caches for 10 s
// after their last use, then in a pool that only the second collection
// after that frees, and an idle Go process collects every 2 minutes and
// hands freed pages back to the system slowly. A single server that had
// just hibernated 1 GiB of sessions held about as much for minutes
// (docs/performance.md, "Hibernation"). So a node with the embedded store
// gives its memory back once a burst of allocation has gone quiet.
const (
	// memoryCheckEvery is how often the allocation counter is read; a
	// quiet period is one interval, longer than the block caches' 10 s.
	memoryCheckEvery = 15 * time.Second
	// memoryBurst is the allocation within one interval that counts as a
	// burst worth giving back (a few snapshot chunks, not a busy API).
	memoryBurst = 64 << 20
)

// allocatedBytes is the process's cumulative heap allocation, read
// without stopping the world.
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// memoryReturner decides, from the cumulative allocation read at each
// check, when to give memory back: at the first quiet interval (less than
// an eighth of a burst allocated) after one with a burst.
type memoryReturner struct {
	last    uint64
	pending bool
}

// observe takes the counter's new value and says whether to give memory
// back now.
func (m *memoryReturner) observe(allocated uint64) bool {
	delta := allocated - m.last
	m.last = allocated
	switch {
	case delta >= memoryBurst:
		m.pending = true
	case m.pending && delta < memoryBurst/8:
		m.pending = false
		return true
	}
	return false
}

// returnMemory runs until done is closed. Two forced collections: the
// first moves the block pool's buffers to its victim cache, the second
// frees them; FreeOSMemory then returns the pages at once.
func returnMemory(every time.Duration, done <-chan struct{}) {
	m := memoryReturner{last: allocatedBytes()}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if m.observe(allocatedBytes()) {
				debug.FreeOSMemory()
				debug.FreeOSMemory()
			}
		}
	}
}
