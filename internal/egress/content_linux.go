package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"

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
}

func newReadAhead(src io.Reader) *readAhead {
	a := &readAhead{full: make(chan []byte, aheadBuffers), free: make(chan []byte, aheadBuffers),
		stop: make(chan struct{})}
	for range aheadBuffers {
		a.free <- make([]byte, relayBuffer)
	}
	go a.run(src)
	return a
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
// secret value redacted, chunked content again in chunks (of the
// egress's own sizes: a value split over the destination's chunks is
// redacted as one), flushing each batch readAhead gives as soon as it is
// read, so that a stream (server-sent events) is not held up.
func copyContent(out *bufio.Writer, upR *bufio.Reader, resp *http1.Response, secrets []Bound) error {
	ahead := newReadAhead(resp.ContentReader(upR))
	defer ahead.Close()
	chunked := resp.Framing == http1.Chunked
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
			frame = frame[:0]
			if chunked {
				frame = append(strconv.AppendInt(frame, int64(len(pending)), 16), "\r\n"...)
			}
			frame = append(frame, pending...)
			if chunked {
				frame = append(frame, "\r\n"...)
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
	if chunked {
		if _, err := out.WriteString("0\r\n\r\n"); err != nil {
			return err
		}
	}
	return out.Flush()
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
