package egress

import (
	"encoding/binary"
	"net"
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
	// helloEnd is where the records of a checked ClientHello end in
	// first.
	helloEnd int
}

// inspect reads the first bytes the payload sends on a connection to name
// and tells what they begin: a TLS ClientHello, whose server name it
// checks against name, or an HTTP/1.x request line. A payload that sends
// nothing first (a server-speaks-first protocol) is waited for: its first
// bytes are still checked before any is forwarded.
func inspect(c net.Conn, name string) opening {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 4096)
	s := &sniffer{name: name}
	var until time.Time
	for {
		n, err := c.Read(tmp)
		if n > 0 && len(buf) == 0 {
			until = time.Now().Add(inspectTimeout)
			_ = c.SetReadDeadline(until)
		}
		buf = append(buf, tmp[:n]...)
		kind, reason, done := s.classify(buf)
		if done {
			_ = c.SetReadDeadline(time.Time{})
			return opening{first: buf, kind: kind, reason: reason, until: until, helloEnd: s.hello.end}
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

// sniffer tells what the first bytes of a connection to name begin as
// they arrive. It reads each byte about once however finely the payload
// splits them (a record or a byte per read): looking at the whole buffer
// again on every read would cost the egress time growing with the square
// of what a payload trickles in.
type sniffer struct {
	name  string
	hello helloRecords
	// seen is how much of the stream the last look for a request line
	// saw.
	seen int
}

// classify decides once buf, the stream so far, holds enough: done is
// false while more bytes are needed. A stream is TLS when it starts with a
// handshake record, HTTP when it starts with a request line as http1 reads
// it, and other as soon as it can be neither.
func (s *sniffer) classify(buf []byte) (kind stream, reason string, done bool) {
	switch {
	case len(buf) == 0:
		return streamOther, "", false
	case buf[0] == 0x16: // TLS handshake record
		msg, reason, done := s.hello.add(buf)
		if !done || reason != "" {
			return streamTLS, reason, done
		}
		return streamTLS, checkHello(msg, s.name), true
	}
	// A prefix of a request line grown by visible characters only is
	// looked at again once a byte of another kind (a space, CR, LF or one
	// no request line holds) arrives, or at its limit: a line ends with
	// one, and it holds at most four. The prefix may have gone wrong in
	// between ("GET / HTTPS"); that is told then, and nothing is
	// forwarded before.
	grown := buf[s.seen:]
	if s.seen > 0 && len(buf) < http1.MaxHead && visible(grown) {
		s.seen = len(buf)
		return streamOther, "", false
	}
	s.seen = len(buf)
	n, err := http1.ScanRequestLine(buf)
	switch {
	case err != nil:
		return streamOther, "", true
	case n == 0:
		return streamOther, "", false
	}
	return streamHTTP, "", true
}

// checkHello checks a ClientHello message against the name connected to:
// the refusal, "" when it names it.
func checkHello(msg []byte, name string) string {
	sni, err := clientHelloSNI(msg)
	switch {
	case err != nil:
		return ReasonBadClientHello
	case !sameName(sni, name):
		// A hello without a server name cannot be checked either.
		return ReasonSNIMismatch
	}
	return ""
}

// visible reports whether b holds only visible ASCII characters.
func visible(b []byte) bool {
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// sameName reports whether a server name is name (lower-case ASCII) in
// any ASCII case. Only ASCII letters fold: to strings.ToLower "İ" and the
// Kelvin sign are "i" and "k", but a server comparing names byte by byte
// would not know "bİg.test" and might answer as its default site.
func sameName(sni, name string) bool {
	if len(sni) != len(name) {
		return false
	}
	for i := range len(sni) {
		c := sni[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// helloRecords reassembles the handshake message that the TLS records at
// the start of a stream carry, which a client may split over several
// records, reading each record once as the stream grows.
type helloRecords struct {
	end int    // where the whole records read so far end in the stream
	hs  []byte // their handshake data
}

// add reads the whole records of buf, the stream so far, that it has not
// read yet. A record of another type before the message is whole, one of
// another protocol version, an empty one, a message longer than maxHello
// and bytes after the message in its last record (no client sends
// another message with its ClientHello) are refused.
func (r *helloRecords) add(buf []byte) (msg []byte, reason string, done bool) {
	for {
		rest := buf[r.end:]
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
		r.hs = append(r.hs, rest[5:5+n]...)
		r.end += 5 + n
		if len(r.hs) < 4 {
			continue
		}
		need := 4 + (int(r.hs[1])<<16 | int(r.hs[2])<<8 | int(r.hs[3]))
		if need > maxHello {
			return nil, ReasonBadClientHello, true
		}
		switch {
		case len(r.hs) > need:
			return nil, ReasonBadClientHello, true
		case len(r.hs) == need:
			return r.hs, "", true
		}
	}
	if len(buf) >= maxInspect {
		return nil, ReasonBadClientHello, true
	}
	return nil, "", false
}
