package egress

import (
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"strings"
	"time"
)

// inspectTimeout bounds the wait for a whole TLS ClientHello or HTTP
// request head once its first byte has arrived: one deadline, not renewed
// by each read, so a payload cannot hold a check open by trickling bytes.
const inspectTimeout = 10 * time.Second

// maxHello bounds the ClientHello message reassembled from its records
// (type, length and body).
const maxHello = 64 << 10

// maxInspect bounds what is buffered to find a server name: the records
// of a ClientHello of at most maxHello, with their headers.
const maxInspect = maxHello + 5*8

// stream is what the first bytes of a connection were taken for.
type stream int

const (
	streamOther stream = iota // neither TLS nor HTTP: passes on the name alone
	streamTLS                 // a TLS ClientHello, checked
	streamHTTP                // plain HTTP: each request head is checked (forwardHTTP)
)

// inspect reads the first bytes the payload sends on a connection to name
// and tells what they begin: for TLS it checks the server name of the
// ClientHello against name. It returns the bytes read (to be forwarded)
// and a refusal reason, "" when the connection may go on. A payload that
// sends nothing first (a server-speaks-first protocol) is waited for: its
// first bytes are still checked before any is forwarded.
func inspect(c net.Conn, name string) ([]byte, stream, string) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	for {
		n, err := c.Read(tmp)
		if n > 0 && len(buf) == 0 {
			_ = c.SetReadDeadline(time.Now().Add(inspectTimeout))
		}
		buf = append(buf, tmp[:n]...)
		kind, verdict, done := classify(buf, name)
		if done {
			_ = c.SetReadDeadline(time.Time{})
			return buf, kind, verdict
		}
		if err != nil {
			// Ended or stalled before the stream could be told: a TLS
			// hello cut short is refused; a few bytes of something else
			// go on.
			if len(buf) > 0 && buf[0] == 0x16 {
				return buf, streamTLS, ReasonBadClientHello
			}
			return buf, streamOther, ""
		}
	}
}

// classify decides once buf holds enough: done is false while more bytes
// are needed.
func classify(buf []byte, name string) (kind stream, reason string, done bool) {
	switch {
	case len(buf) == 0:
		return streamOther, "", false
	case buf[0] == 0x16: // TLS handshake record
		msg, reason, done := helloMessage(buf)
		if !done || reason != "" {
			return streamTLS, reason, done
		}
		sni, err := clientHelloSNI(msg)
		switch {
		case err != nil:
			return streamTLS, ReasonBadClientHello, true
		case !sameName(sni, name):
			// A hello without a server name cannot be checked either.
			return streamTLS, ReasonSNIMismatch, true
		}
		return streamTLS, "", true
	}
	isHTTP, decided := httpStart(buf)
	switch {
	case !decided:
		return streamOther, "", false
	case isHTTP:
		return streamHTTP, "", true
	}
	return streamOther, "", true
}

// helloMessage reassembles the handshake message the TLS records at the
// start of buf carry, which a client may split over several records. A
// record of another type before the message is whole, or a message longer
// than maxHello, is refused.
func helloMessage(buf []byte) (msg []byte, reason string, done bool) {
	var hs []byte
	for rest := buf; ; {
		if len(rest) < 5 {
			break
		}
		if rest[0] != 0x16 {
			return nil, ReasonBadClientHello, true
		}
		n := int(binary.BigEndian.Uint16(rest[3:5]))
		if n == 0 || n > 1<<14 {
			return nil, ReasonBadClientHello, true
		}
		if len(rest) < 5+n {
			break
		}
		hs = append(hs, rest[5:5+n]...)
		rest = rest[5+n:]
		if len(hs) < 4 {
			continue
		}
		need := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		if need > maxHello {
			return nil, ReasonBadClientHello, true
		}
		if len(hs) >= need {
			return hs[:need], "", true
		}
	}
	if len(buf) >= maxInspect {
		return nil, ReasonBadClientHello, true
	}
	return nil, "", false
}

// sameName compares a server name or Host (maybe with a port) with the
// name connected to.
func sameName(got, name string) bool {
	got = strings.TrimSuffix(strings.ToLower(got), ".")
	if h, _, err := net.SplitHostPort(got); err == nil {
		got = h
	}
	return got == name
}

var httpMethods = []string{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE", "PRI"}

// maxMethod is how long a token may grow before the stream is taken for
// something other than HTTP.
const maxMethod = 32

// httpStart tells whether b begins an HTTP/1 request (or an HTTP/2
// preface): blank lines, a known method, or any token followed by a space
// and a request target that starts like one ("/", "*", "http:",
// "https:"). decided is false while b is too short to tell.
func httpStart(b []byte) (isHTTP, decided bool) {
	if b[0] == '\r' || b[0] == '\n' {
		return true, true
	}
	i := 0
	for i < len(b) && isTokenByte(b[i]) {
		i++
	}
	switch {
	case i == len(b):
		return false, i >= maxMethod
	case i == 0 || b[i] != ' ':
		return false, true
	case slices.Contains(httpMethods, string(b[:i])):
		return true, true
	}
	target := strings.ToLower(string(b[i+1:]))
	for _, p := range []string{"/", "*", "http:", "https:"} {
		if strings.HasPrefix(target, p) {
			return true, true
		}
		if strings.HasPrefix(p, target) {
			return false, false
		}
	}
	return false, true
}

// isTokenByte reports whether c may appear in an HTTP method (RFC 9110
// tchar).
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

var errShortHello = errors.New("short client hello")

// clientHelloSNI returns the server name of a TLS ClientHello handshake
// message (the record's body), "" when it has none.
func clientHelloSNI(b []byte) (string, error) {
	r := reader(b)
	typ, ok := r.u8()
	if !ok || typ != 1 {
		return "", errors.New("not a client hello")
	}
	if _, ok := r.u24(); !ok {
		return "", errShortHello
	}
	// version, random, session id, cipher suites, compression methods
	if !r.skip(2+32) || !r.skipVec8() || !r.skipVec16() || !r.skipVec8() {
		return "", errShortHello
	}
	if len(r) == 0 {
		return "", nil // no extensions, so no server name
	}
	exts, ok := r.vec16()
	if !ok {
		return "", errShortHello
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		body, ok2 := exts.vec16()
		if !ok1 || !ok2 {
			return "", errShortHello
		}
		if typ != 0 { // server_name
			continue
		}
		list, ok := body.vec16()
		for ok && len(list) > 0 {
			kind, ok1 := list.u8()
			host, ok2 := list.vec16()
			if !ok1 || !ok2 {
				return "", errShortHello
			}
			if kind == 0 {
				return string(host), nil
			}
		}
		return "", errShortHello
	}
	return "", nil
}

// reader consumes a byte slice from the front.
type reader []byte

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

func (r *reader) u24() (int, bool) {
	if len(*r) < 3 {
		return 0, false
	}
	v := int((*r)[0])<<16 | int((*r)[1])<<8 | int((*r)[2])
	*r = (*r)[3:]
	return v, true
}

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) vec8() (reader, bool) {
	n, ok := r.u8()
	if !ok || len(*r) < int(n) {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) vec16() (reader, bool) {
	n, ok := r.u16()
	if !ok || len(*r) < int(n) {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec8() bool  { _, ok := r.vec8(); return ok }
func (r *reader) skipVec16() bool { _, ok := r.vec16(); return ok }
