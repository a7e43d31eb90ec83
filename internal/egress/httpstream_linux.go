package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// forwardHTTP relays what the payload sends on a plain-HTTP connection
// to t. Each request head is read whole by http1 (within inspectTimeout
// of its first byte; the first head within op.until) and checked before
// any of it is forwarded; its content follows as it comes, framed as the
// head declares, so that the next head is found where the destination
// finds it and checked as the first was. It returns a refusal reason, ""
// when the payload ended the stream (or it broke).
func (r *relay) forwardHTTP(up, down net.Conn, op opening, t target) string {
	// What was checked goes to the destination in as many writes as the
	// payload's reads, not one for each head, chunk-size line, chunk and
	// CRLF: a body of one-byte chunks would cost three writes, and as
	// many segments to the destination, for every six bytes it sends.
	bw := bufio.NewWriterSize(&upstream{r: r, up: up}, relayBuffer)
	src := &flushing{r: io.MultiReader(bytes.NewReader(op.first), down), w: bw}
	br := bufio.NewReaderSize(src, relayBuffer)
	// w hides bw's ReadFrom, which would read into bw's buffer while src
	// flushes it.
	w := struct{ io.Writer }{bw}
	until := op.until
	for {
		if bw.Flush() != nil {
			return ""
		}
		if until.IsZero() {
			// Between requests the payload may wait as long as it likes.
			if _, err := br.Peek(1); err != nil {
				return ""
			}
			until = time.Now().Add(inspectTimeout)
		}
		_ = down.SetReadDeadline(until)
		raw, h, err := http1.ReadHead(br)
		_ = down.SetReadDeadline(time.Time{})
		until = time.Time{}
		switch {
		case errors.Is(err, io.EOF) || src.err != nil:
			return ""
		case err != nil:
			return ReasonBadHTTPRequest
		}
		if reason := checkHead(h, t); reason != "" {
			return reason
		}
		// A placeholder is never replaced on plain HTTP; it is reported.
		x := &exchange{h: h, path: eventPath(h.Method, h.Target, t.name, t.port)}
		for _, s := range placeholdersIn(raw, r.e.grant.Secrets) {
			r.placeholderEvent(t, x, s, placeholderWhere(h, s, t, false))
		}
		if _, err := w.Write(raw); err != nil {
			return ""
		}
		scan := newPlaceholderScan(r.e.grant.Secrets)
		if err := http1.CopyBodySeen(w, scan, br, h); err != nil {
			if errors.Is(err, http1.ErrChunk) {
				return ReasonBadHTTPRequest
			}
			return "" // the payload or the destination ended, or a limit cut
		}
		for _, s := range scan.Found() {
			r.placeholderEvent(t, x, s, ReasonPlaceholderInBody)
		}
	}
}

// flushing flushes w before each read of r: what was written goes out
// before the relay waits for more.
type flushing struct {
	r   io.Reader
	w   *bufio.Writer
	err error // the flush's, which ends the relay
}

func (f *flushing) Read(p []byte) (int, error) {
	if f.err = f.w.Flush(); f.err != nil {
		return 0, f.err
	}
	return f.r.Read(p)
}

// upstream writes to the destination what the payload sent, counted
// against the limits.
type upstream struct {
	r  *relay
	up net.Conn
}

func (u *upstream) Write(p []byte) (int, error) {
	if !u.r.count(len(p), true) {
		return 0, errOverLimit
	}
	return u.up.Write(p)
}

var errOverLimit = errors.New("over a network limit")

// bodiless are the methods whose content servers commonly leave unread
// (RFC 9110 §9.3.1: it has no defined meaning and may be refused as a
// smuggling attempt): a server that answers without reading it would take
// it for the next request, which the egress never checked.
var bodiless = map[string]bool{"GET": true, "HEAD": true, "TRACE": true}

// checkHead checks a request head against the destination t: the Host
// field must name it, and so must the authority of an absolute-form
// target. HTTP/2 (h2c), protocol switches (Upgrade, CONNECT) and content
// on GET, HEAD or TRACE are refused: what follows them is not a request
// head the destination would read where the egress does.
func checkHead(h *http1.Head, t target) string {
	switch {
	case h.Method == "CONNECT" || h.Has("Upgrade"):
		return ReasonBadHTTPRequest
	case bodiless[h.Method] && (h.Framing == http1.Chunked || h.Length > 0):
		return ReasonBadHTTPRequest
	case !namesTarget(h.Host, t) || h.Authority != "" && !namesTarget(h.Authority, t):
		return ReasonHostMismatch
	}
	return ""
}

// namesTarget reports whether a Host or an authority is the name
// connected to, alone or with the port connected to. Nothing else is
// taken (no trailing dot, no other port): a server that did not know the
// host as written might answer as its default site.
func namesTarget(host string, t target) bool {
	host = strings.ToLower(host)
	return host == t.name || host == t.name+":"+strconv.Itoa(int(t.port))
}
