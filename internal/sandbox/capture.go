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

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

// drain reads r until EOF. It runs in its own goroutine, owned by the run.
func (c *capture) drain(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.add(chunk[:n])
		}
		if err != nil {
			return
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
	room := c.limit - int64(len(c.buf))
	over := int64(len(p)) > room
	if over {
		p = p[:max(room, 0)]
	}
	c.grow(len(p))
	c.buf = append(c.buf, p...)
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

// minCapture is the first buffer of a capture that keeps anything.
const minCapture = 64 << 10

// grow makes room for n more bytes by doubling the buffer, never beyond
// the limit. append alone grows a large slice by a quarter at a time: for
// an output of 10 MiB that allocates and copies about 50 MiB, with the
// old and the new buffer alive together at every step.
func (c *capture) grow(n int) {
	need := len(c.buf) + n
	if need <= cap(c.buf) {
		return
	}
	size := max(2*cap(c.buf), need, minCapture)
	if int64(size) > c.limit {
		size = max(need, int(c.limit))
	}
	b := make([]byte, len(c.buf), size)
	copy(b, c.buf)
	c.buf = b
}

// result returns what was kept and whether anything was dropped.
func (c *capture) result() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf, c.truncated
}
