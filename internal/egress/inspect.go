package egress

import (
	"encoding/binary"
	"net"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// inspectTimeout bounds the wait for a whole TLS ClientHello or HTTP
// request head once its first byte has arrived: one deadline, not renewed
// by each read, so a payload cannot hold a check open by trickling bytes.
const inspectTimeout = 10 * time.Second

// maxHello bounds the ClientHello message reassembled from its records
// (type, length and body).
const maxHello = 64 << 10

// maxInspect bounds what is buffered to tell a connection's protocol: the
// records of a ClientHello of at most maxHello, with their headers, or a
// request line.
const maxInspect = maxHello + 5*8

// stream is what the first bytes of a connection were taken for.
type stream int

const (
	streamOther stream = iota // neither TLS nor HTTP: only an address rule lets it through
	streamTLS                 // a TLS ClientHello, checked
	streamHTTP                // plain HTTP: each request head is checked (forwardHTTP)
)

// opening is what inspect read of a connection.
type opening struct {
	first  []byte    // the bytes read, to be forwarded once allowed
	kind   stream    // what they begin
	reason string    // a refusal, "" when the connection may go on
	until  time.Time // the deadline of a request head begun in first
}

// inspect reads the first bytes the payload sends on a connection to name
// and tells what they begin: a TLS ClientHello, whose server name it
// checks against name, or an HTTP/1.x request line. A payload that sends
// nothing first (a server-speaks-first protocol) is waited for: its first
// bytes are still checked before any is forwarded.
func inspect(c net.Conn, name string) opening {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	var until time.Time
	for {
		n, err := c.Read(tmp)
		if n > 0 && len(buf) == 0 {
			until = time.Now().Add(inspectTimeout)
			_ = c.SetReadDeadline(until)
		}
		buf = append(buf, tmp[:n]...)
		kind, reason, done := classify(buf, name)
		if done {
			_ = c.SetReadDeadline(time.Time{})
			return opening{first: buf, kind: kind, reason: reason, until: until}
		}
		if err != nil {
			// Ended or stalled before the stream could be told.
			if len(buf) > 0 && buf[0] == 0x16 {
				return opening{first: buf, kind: streamTLS, reason: ReasonBadClientHello}
			}
			return opening{first: buf, kind: streamOther}
		}
	}
}

// classify decides once buf holds enough: done is false while more bytes
// are needed. A stream is TLS when it starts with a handshake record, HTTP
// when it starts with a request line as http1 reads it, and other as soon
// as it can be neither.
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
		case strings.ToLower(sni) != name:
			// A hello without a server name cannot be checked either.
			return streamTLS, ReasonSNIMismatch, true
		}
		return streamTLS, "", true
	}
	n, err := http1.ScanRequestLine(buf)
	switch {
	case err != nil:
		return streamOther, "", true
	case n == 0:
		return streamOther, "", false
	}
	return streamHTTP, "", true
}

// helloMessage reassembles the handshake message the TLS records at the
// start of buf carry, which a client may split over several records. A
// record of another type before the message is whole, one of another
// protocol version, an empty one or a message longer than maxHello is
// refused.
func helloMessage(buf []byte) (msg []byte, reason string, done bool) {
	var hs []byte
	for rest := buf; ; {
		if len(rest) < 5 {
			break
		}
		if rest[0] != 0x16 || rest[1] != 3 {
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
