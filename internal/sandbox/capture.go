package sandbox

import (
	"io"
	"sync"
)

// capture drains one output pipe of the payload: it keeps at most limit
// bytes, passes every chunk to the live callback, and reports once when the
// payload wrote more than the limit (the run is then ended).
type capture struct {
	stream  Stream
	limit   int64
	live    OutputFunc
	onLimit func(Stream)
	// discard keeps nothing and enforces no limit: every chunk goes to
	// live (Spec.LiveOnly).
	discard bool

	mu sync.Mutex
	// blocks hold what is kept, in order: pieces that are filled and never
	// regrown, so keeping an output of any size copies it once, and
	// result joins them once.
	blocks    [][]byte
	size      int64
	truncated bool
}

// captureChunk is the size of the buffer a capture reads its pipe into.
const captureChunk = 32 << 10

// bulkChunk is the buffer a capture reads into while the payload writes
// faster than it reads (a read filled the chunk): a session's state of
// hundreds of MiB then crosses in pieces the size of the pipe (bulkPipe)
// rather than of the chunk, with some thirty times fewer wake-ups of
// both sides. It is let go as soon as a read returns less than a chunk,
// so an idle payload holds only its chunk.
const bulkChunk = 1 << 20

// drain reads r until EOF into chunk (any size; captureChunk from the
// Manager's pool), or into a bulkChunk while the output streams. It runs
// in its own goroutine, owned by the run.
func (c *capture) drain(r io.Reader, chunk []byte) {
	var bulk []byte
	for {
		buf := chunk
		if bulk != nil {
			buf = bulk
		}
		n, err := r.Read(buf)
		if n > 0 {
			c.add(buf[:n])
		}
		if err != nil {
			return
		}
		switch {
		case bulk == nil && n == len(chunk) && len(chunk) < bulkChunk:
			bulk = make([]byte, bulkChunk)
		case bulk != nil && n < len(chunk):
			bulk = nil
		}
	}
}

func (c *capture) add(p []byte) {
	if c.discard {
		if c.live != nil {
			c.live(c.stream, p)
		}
		return
	}
	c.mu.Lock()
	room := c.limit - c.size
	over := int64(len(p)) > room
	if over {
		p = p[:max(room, 0)]
	}
	c.keep(p)
	first := over && !c.truncated
	if over {
		c.truncated = true
	}
	c.mu.Unlock()
	if len(p) > 0 && c.live != nil {
		c.live(c.stream, p)
	}
	if first && c.onLimit != nil {
		c.onLimit(c.stream)
	}
}

// The first block of a capture that keeps anything is minBlock bytes;
// each next one is twice the previous, up to maxBlock. Small outputs stay
// small, and a large one is a list of maxBlock pieces.
const (
	minBlock = 4 << 10
	maxBlock = 256 << 10
)

// keep appends p to the blocks; c.mu is held.
func (c *capture) keep(p []byte) {
	c.size += int64(len(p))
	for len(p) > 0 {
		n := len(c.blocks)
		if n == 0 || len(c.blocks[n-1]) == cap(c.blocks[n-1]) {
			size := minBlock
			if n > 0 {
				size = min(2*cap(c.blocks[n-1]), maxBlock)
			}
			c.blocks = append(c.blocks, make([]byte, 0, size))
			n++
		}
		last := c.blocks[n-1]
		k := min(len(p), cap(last)-len(last))
		c.blocks[n-1] = append(last, p[:k]...)
		p = p[k:]
	}
}

// result returns what was kept, in one piece, and whether anything was
// dropped. Each block is let go as soon as it is copied, so that joining
// them never holds the output twice.
func (c *capture) result() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch len(c.blocks) {
	case 0:
		return nil, c.truncated
	case 1:
		return c.blocks[0], c.truncated
	}
	out := make([]byte, 0, c.size)
	for i, b := range c.blocks {
		out = append(out, b...)
		c.blocks[i] = nil
	}
	c.blocks = [][]byte{out}
	return out, c.truncated
}
