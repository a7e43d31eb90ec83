package egress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"time"
)

// inspectTimeout bounds the wait for a TLS ClientHello or HTTP header
// that has begun to arrive.
const inspectTimeout = 10 * time.Second

// maxInspect bounds what is buffered to find a server name: a TLS record
// (header and at most 16 KiB) or an HTTP request head.
const maxInspect = 5 + 16<<10

// inspect reads the first bytes the payload sends on a connection to name
// and checks the TLS server name or HTTP Host they carry against it. It
// returns the bytes read (to be forwarded) and a refusal reason, "" when
// the connection may go on. Other protocols pass on the name alone. A
// payload that sends nothing first (a server-speaks-first protocol) is
// waited for: its first bytes are still checked before any is forwarded.
func inspect(c net.Conn, name string) ([]byte, string) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	started := false
	for {
		if started {
			_ = c.SetReadDeadline(time.Now().Add(inspectTimeout))
		}
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if len(buf) > 0 && !started {
			started = true
		}
		verdict, done := classify(buf, name)
		if done {
			_ = c.SetReadDeadline(time.Time{})
			return buf, verdict
		}
		if err != nil {
			// Ended or stalled before the name could be read: a TLS
			// hello or HTTP head cut short is refused; a few bytes of
			// something else go on.
			if len(buf) > 0 && (buf[0] == 0x16 || looksHTTP(buf)) {
				return buf, ReasonBadClientHello
			}
			return buf, ""
		}
	}
}

// classify decides once buf holds enough: done is false while more bytes
// are needed.
func classify(buf []byte, name string) (reason string, done bool) {
	switch {
	case len(buf) == 0:
		return "", false
	case buf[0] == 0x16: // TLS handshake record
		if len(buf) < 5 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(buf[3:5]))
		if len(buf) < 5+n && len(buf) < maxInspect {
			return "", false
		}
		sni, err := clientHelloSNI(buf[5:min(len(buf), 5+n)])
		switch {
		case err != nil:
			return ReasonBadClientHello, true
		case sni != "" && !sameName(sni, name):
			return ReasonSNIMismatch, true
		}
		return "", true
	case looksHTTP(buf):
		end := bytes.Index(buf, []byte("\r\n\r\n"))
		if end < 0 && len(buf) < maxInspect {
			return "", false
		}
		if end < 0 {
			return ReasonHostMismatch, true
		}
		if host, ok := httpHost(buf[:end]); ok && !sameName(host, name) {
			return ReasonHostMismatch, true
		}
		return "", true
	}
	// Neither TLS nor HTTP (or too short to tell): wait for a full method
	// token before calling it another protocol.
	if len(buf) < 8 && isToken(buf) {
		return "", false
	}
	return "", true
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

var httpMethods = []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "}

func looksHTTP(b []byte) bool {
	for _, m := range httpMethods {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// isToken reports whether b is a prefix of an HTTP method.
func isToken(b []byte) bool {
	for _, m := range httpMethods {
		if strings.HasPrefix(m, string(b)) {
			return true
		}
	}
	return false
}

// httpHost returns the Host header of a request head.
func httpHost(head []byte) (string, bool) {
	for _, line := range strings.Split(string(head), "\r\n")[1:] {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "host") {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
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
		return "", nil // no extensions
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
