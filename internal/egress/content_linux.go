package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// aheadBuffers is how many reads of a response's content may wait to be
// written to the payload (each at most relayBuffer bytes), and
// maxBatch how much of what waits goes to the payload at once, as one
// write (and, for chunked content, one chunk).
const (
	aheadBuffers = 4
	maxBatch     = aheadBuffers * relayBuffer
)

// readAhead reads content in a goroutine of its own, a read at a time
// (TLS gives at most one record, 16 KiB, each), so that what came while
// the last batch was being written goes to the payload as one: fewer TLS
// records, packets and chunks for the payload to take apart than a write
// per record, and never a wait for data that has not come (a stream, such
// as server-sent events, is written as soon as it is read).
type readAhead struct {
	full chan []byte // what was read, in order; closed after the last
	free chan []byte // buffers to read into
	stop chan struct{}
	err  error // the read's error (io.EOF at the end), set before full is closed

	mu     sync.Mutex
	chunks []int64 // sizes of chunks begun, not yet taken
}

// newReadAhead starts reading resp's content from upR.
func newReadAhead(upR *bufio.Reader, resp *http1.Response) *readAhead {
	a := &readAhead{full: make(chan []byte, aheadBuffers), free: make(chan []byte, aheadBuffers),
		stop: make(chan struct{})}
	for range aheadBuffers {
		a.free <- make([]byte, relayBuffer)
	}
	go a.run(resp.ContentReader(upR, a.begin))
	return a
}

// begin records a chunk's size as its data is about to be read: before
// any of it is in full.
func (a *readAhead) begin(size int64) {
	a.mu.Lock()
	a.chunks = append(a.chunks, size)
	a.mu.Unlock()
}

// takeChunks returns the sizes of the chunks begun since the last call.
func (a *readAhead) takeChunks(into []int64) []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	into = append(into, a.chunks...)
	a.chunks = a.chunks[:0]
	return into
}

// run reads until src ends or fails, or Close. Sends never block: full
// and free each hold every buffer there is.
func (a *readAhead) run(src io.Reader) {
	defer close(a.full)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			a.err = errors.New("read ahead stopped")
			return
		}
		n, err := src.Read(buf[:cap(buf)])
		if n > 0 {
			a.full <- buf[:n]
		} else {
			a.free <- buf
		}
		if err != nil {
			a.err = err
			return
		}
	}
}

// next appends to batch what was read: waits for the first read, then
// takes those already done, while batch stays within maxBatch. It
// returns io.EOF (or the read's error) once everything was taken.
func (a *readAhead) next(batch []byte) ([]byte, error) {
	buf, ok := <-a.full
	if !ok {
		return batch, a.err
	}
	for {
		batch = append(batch, buf...)
		a.free <- buf[:cap(buf)]
		if len(batch)+relayBuffer > maxBatch {
			return batch, nil
		}
		select {
		case buf, ok = <-a.full:
			if !ok {
				// The error waits for the next call: what was read
				// goes out first.
				return batch, nil
			}
		default:
			return batch, nil
		}
	}
}

// Close stops the reading once its current read returns (the connection
// ending ends a read that waits).
func (a *readAhead) Close() { close(a.stop) }

// copyContent copies a response's content to the payload with every
// secret value redacted, writing each batch readAhead gives as soon as it
// is read, so that a stream (server-sent events) is not held up. Chunked
// content keeps the destination's chunks: the redaction keeps lengths,
// so each byte goes in the chunk it came in (a value split over two
// chunks is redacted all the same), and a payload reads a download sent
// as one chunk as one.
func copyContent(out *bufio.Writer, upR *bufio.Reader, resp *http1.Response, secrets []Bound) error {
	ahead := newReadAhead(upR, resp)
	defer ahead.Close()
	var chunks *chunkFramer
	if resp.Framing == http1.Chunked {
		chunks = &chunkFramer{more: ahead.takeChunks}
	}
	var pending []byte // redacted, to write
	red := newRedactor(appender{&pending}, secrets)
	var frame, batch []byte
	for {
		var err error
		batch, err = ahead.next(batch[:0])
		if len(batch) > 0 {
			if _, werr := red.Write(batch); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			if ferr := red.Flush(); ferr != nil {
				return ferr
			}
		} else if err != nil {
			return err
		}
		if len(pending) > 0 {
			frame = append(frame[:0], pending...)
			if chunks != nil {
				var ferr error
				if frame, ferr = chunks.frame(frame[:0], pending); ferr != nil {
					return ferr
				}
			}
			pending = pending[:0]
			if _, werr := out.Write(frame); werr != nil {
				return werr
			}
		}
		if err != nil {
			break
		}
		if werr := out.Flush(); werr != nil {
			return werr
		}
	}
	if chunks != nil {
		if chunks.left != 0 {
			return errChunkFraming
		}
		if _, err := out.WriteString("0\r\n\r\n"); err != nil {
			return err
		}
	}
	return out.Flush()
}

// errChunkFraming is redacted content that does not fill the chunks it
// came in: never, as the redaction keeps lengths.
var errChunkFraming = errors.New("redacted content does not fill its chunks")

// chunkFramer writes redacted content in the chunks of the destination,
// whose sizes more gives as they begin.
type chunkFramer struct {
	more  func([]int64) []int64
	sizes []int64 // begun, not yet written
	left  int64   // of the chunk being written
}

// frame appends p to dst in chunk framing.
func (f *chunkFramer) frame(dst, p []byte) ([]byte, error) {
	for len(p) > 0 {
		if f.left == 0 {
			if len(f.sizes) == 0 {
				f.sizes = f.more(f.sizes)
			}
			if len(f.sizes) == 0 {
				return nil, errChunkFraming
			}
			f.left, f.sizes = f.sizes[0], f.sizes[1:]
			dst = append(strconv.AppendInt(dst, f.left, 16), "\r\n"...)
		}
		n := min(int64(len(p)), f.left)
		dst = append(dst, p[:n]...)
		p, f.left = p[n:], f.left-n
		if f.left == 0 {
			dst = append(dst, "\r\n"...)
		}
	}
	return dst, nil
}

// appender appends what is written to it to a slice.
type appender struct{ b *[]byte }

func (a appender) Write(p []byte) (int, error) {
	*a.b = append(*a.b, p...)
	return len(p), nil
}

// heldConn is the payload's side of a terminated connection under its
// TLS: while held, what TLS writes (a record at a time) is kept, to be
// written as one.
type heldConn struct {
	net.Conn
	hold bool
	buf  []byte
}

func (c *heldConn) Write(p []byte) (int, error) {
	if !c.hold {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// batchedTLS is a terminated TLS connection to the payload whose every
// write goes to the payload's side as one write, however many records it
// takes: netstack then sends a few large segments rather than a segment
// per record.
type batchedTLS struct {
	*tls.Conn
	under *heldConn
}

func (b batchedTLS) Write(p []byte) (int, error) {
	b.under.hold = true
	n, err := b.Conn.Write(p)
	b.under.hold = false
	if len(b.under.buf) > 0 {
		_, werr := b.under.Conn.Write(b.under.buf)
		b.under.buf = b.under.buf[:0]
		if err == nil {
			err = werr
		}
	}
	return n, err
}
