package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"time"
)

// maxHeld bounds the bytes read from the payload but not yet forwarded
// on a plain-HTTP connection: a request head, or a piece of a body.
const maxHeld = 64 << 10

var errHeadTooLong = errors.New("request head too long")

// heldReader keeps what it reads until it is forwarded.
type heldReader struct {
	r    io.Reader
	held []byte
}

func (h *heldReader) Read(p []byte) (int, error) {
	room := maxHeld - len(h.held)
	if room <= 0 {
		return 0, errHeadTooLong
	}
	n, err := h.r.Read(p[:min(len(p), room)])
	h.held = append(h.held, p[:n]...)
	return n, err
}

// forwardHTTP relays what the payload sends on a plain-HTTP connection
// to name. Each request head is read whole (within one inspectTimeout
// from its first byte) and checked before any of it is forwarded; its
// body is passed on as it comes, so the next request on the connection
// is found and checked as the first was. It returns a refusal reason, ""
// when the payload ended the stream (or it broke).
func (r *relay) forwardHTTP(up, down net.Conn, first []byte, name string) string {
	src := &heldReader{r: io.MultiReader(bytes.NewReader(first), down)}
	br := bufio.NewReaderSize(src, 4096)
	// flush forwards what the parser has consumed.
	flush := func() bool {
		n := len(src.held) - br.Buffered()
		if n == 0 {
			return true
		}
		if !r.count(n, true) {
			return false
		}
		_, err := up.Write(src.held[:n])
		src.held = src.held[:copy(src.held, src.held[n:])]
		return err == nil
	}
	discard := make([]byte, 32<<10)
	for {
		// Blank lines before a request are passed on: servers skip them.
		for {
			c, err := br.ReadByte()
			if err != nil {
				flush()
				return ""
			}
			if c != '\r' && c != '\n' {
				_ = br.UnreadByte()
				break
			}
		}
		if !flush() {
			return ""
		}
		_ = down.SetReadDeadline(time.Now().Add(inspectTimeout))
		req, err := http.ReadRequest(br)
		_ = down.SetReadDeadline(time.Time{})
		if err != nil {
			return ReasonBadHTTPRequest
		}
		if reason := checkRequest(req, src.held[:len(src.held)-br.Buffered()], name); reason != "" {
			return reason
		}
		if !flush() {
			return ""
		}
		for {
			_, err := req.Body.Read(discard)
			if !flush() {
				return ""
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return ""
			}
		}
	}
}

// checkRequest checks a parsed request whose raw bytes start with head
// against the name connected to: the Host header must be there once and
// name it, and so must the authority of an absolute-form target. HTTP/2
// (h2c) and protocol switches (Upgrade, CONNECT) are refused: what they
// carry next is not a request head that could be checked.
func checkRequest(req *http.Request, head []byte, name string) string {
	if req.ProtoMajor != 1 || req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
		return ReasonBadHTTPRequest
	}
	// http.ReadRequest drops the Host header once it has read it; read
	// the head's header lines again to see what it said.
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return ReasonBadHTTPRequest
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return ReasonBadHTTPRequest
	}
	if hosts := h.Values("Host"); len(hosts) != 1 || !sameName(hosts[0], name) {
		return ReasonHostMismatch
	}
	if req.URL.Host != "" && !sameName(req.URL.Host, name) {
		return ReasonHostMismatch
	}
	return ""
}
