package egress

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"time"
)

// helloRetryRandom is the random of a ServerHello that is a TLS 1.3
// HelloRetryRequest (RFC 8446 §4.1.3): SHA-256 of "HelloRetryRequest".
var helloRetryRandom = sha256.Sum256([]byte("HelloRetryRequest"))

// maxServerFirst bounds what is read of the destination's first bytes to
// tell how it answered a ClientHello: a ServerHello's random lies within
// its first record's first 43 bytes.
const maxServerFirst = 1024

// serverHello watches what the destination sends first on a TLS
// connection: a ServerHello that goes on with the ClientHello checked, or
// anything else. After a HelloRetryRequest (TLS 1.3) the client sends a
// second ClientHello, and a server may take that one's name (OpenSSL
// calls its server-name callback again, and a front end choosing its site
// there chooses again), so that one must be checked as the first was.
type serverHello struct {
	known chan struct{} // closed once goesOn is set
	// goesOn is set when the destination answered with a ServerHello that
	// is not a HelloRetryRequest.
	goesOn bool
	// Only the relay reading the destination uses these.
	decided bool
	buf     []byte // what the destination sent before it was known
}

func newServerHello() *serverHello {
	return &serverHello{known: make(chan struct{})}
}

// see takes what the destination sent, and its read error.
func (s *serverHello) see(p []byte, err error) {
	if s.decided {
		return
	}
	s.buf = append(s.buf, p...)
	goesOn, decided := serverGoesOn(s.buf)
	if decided || err != nil || len(s.buf) > maxServerFirst {
		s.decided, s.goesOn, s.buf = true, goesOn, nil
		close(s.known)
	}
}

// serverGoesOn tells, once the destination's first bytes show it, whether
// they begin a ServerHello that is not a HelloRetryRequest.
func serverGoesOn(b []byte) (goesOn, decided bool) {
	var hs []byte
	for len(b) > 0 {
		if b[0] != 0x16 || len(b) > 1 && b[1] != 3 {
			return false, true
		}
		if len(b) < 5 {
			break
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		hs = append(hs, b[5:min(len(b), 5+n)]...)
		if len(hs) >= 4+2+32 { // type, length, version, random
			return hs[0] == 2 && !bytes.Equal(hs[6:38], helloRetryRandom[:]), true
		}
		if len(b) < 5+n {
			break
		}
		b = b[5+n:]
	}
	return false, false
}

// watched is the destination's side of a connection, read through a
// serverHello.
type watched struct {
	net.Conn
	sh *serverHello
}

func (w watched) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.sh.see(p[:n], err)
	return n, err
}

// forwardTLS relays what the payload sends on a TLS connection whose
// first ClientHello, the records op.first begins with, was checked. The
// rest waits until the destination has answered that hello: after a
// ServerHello that goes on with it, everything flows as it comes; after
// anything else (a HelloRetryRequest), the payload's next handshake
// message must be a ClientHello that passes the same check. It returns a
// refusal reason, "" when the payload ended the stream (or it broke).
func (r *relay) forwardTLS(up, down net.Conn, op opening, sh *serverHello, name string) string {
	w := &upstream{r: r, up: up}
	if _, err := w.Write(op.first[:op.helloEnd]); err != nil {
		return ""
	}
	rest := op.first[op.helloEnd:]
	<-sh.known
	if !sh.goesOn {
		var reason string
		var ok bool
		if rest, reason, ok = retryHello(w, down, rest, name); !ok {
			return reason
		}
	}
	r.copy(up, io.MultiReader(bytes.NewReader(rest), down), nil, true)
	return ""
}

// retryHello reads what the payload sends after its first ClientHello
// was not simply answered, buf first: whole records of other types
// (change_cipher_spec, early data the server skips, an alert) go through
// as they are, and the handshake message that follows must be a
// ClientHello for name, whole within inspectTimeout of its first byte.
// It returns what was read past that hello, to be forwarded; not ok with
// the refusal ("" when the stream ended or broke first).
func retryHello(w io.Writer, down net.Conn, buf []byte, name string) (rest []byte, reason string, ok bool) {
	var hello helloRecords
	tmp := make([]byte, 4096)
	buf = bytes.Clone(buf)
	started := false
	var readErr error
	for {
		for len(buf) >= 5 && buf[0] != 0x16 {
			if buf[0] < 0x14 || buf[0] > 0x17 || buf[1] != 3 {
				return nil, ReasonBadClientHello, false
			}
			n := 5 + int(binary.BigEndian.Uint16(buf[3:5]))
			if len(buf) < n {
				break
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return nil, "", false
			}
			buf = buf[n:]
		}
		if len(buf) > 0 && buf[0] == 0x16 {
			if !started {
				started = true
				_ = down.SetReadDeadline(time.Now().Add(inspectTimeout))
			}
			msg, reason, done := hello.add(buf)
			if done {
				_ = down.SetReadDeadline(time.Time{})
				if reason == "" {
					reason = checkHello(msg, name)
				}
				if reason != "" {
					return nil, reason, false
				}
				if _, err := w.Write(buf[:hello.end]); err != nil {
					return nil, "", false
				}
				return buf[hello.end:], "", true
			}
		}
		if readErr != nil {
			if started {
				return nil, ReasonBadClientHello, false // ended or stalled inside the hello
			}
			return nil, "", false
		}
		var n int
		n, readErr = down.Read(tmp)
		buf = append(buf, tmp[:n]...)
	}
}
