package egress

import (
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in      string
		host    string
		prefix  string
		ports   [2]uint16
		wantErr bool
	}{
		{in: "pypi.org", host: "pypi.org"},
		{in: "*.PyPI.org.", host: "*.pypi.org"},
		{in: "files.pythonhosted.org:443", host: "files.pythonhosted.org", ports: [2]uint16{443, 443}},
		{in: "example.com:8000-8100", host: "example.com", ports: [2]uint16{8000, 8100}},
		{in: "*", host: "*"},
		{in: "1.2.3.4", prefix: "1.2.3.4/32"},
		{in: "1.2.3.0/24:443", prefix: "1.2.3.0/24", ports: [2]uint16{443, 443}},
		{in: "[2001:db8::1]:443", prefix: "2001:db8::1/128", ports: [2]uint16{443, 443}},
		{in: "pypi.org:0", wantErr: true},
		{in: "pypi.org:70000", wantErr: true},
		{in: "pypi.org:9-8", wantErr: true},
		{in: "pypi.org:", wantErr: true},
		{in: "py*.org", wantErr: true},
		{in: "a..b", wantErr: true},
		{in: ":443", wantErr: true},
		{in: "[::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parsed as %+v, want an error", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			prefix := ""
			if r.Prefix.IsValid() {
				prefix = r.Prefix.String()
			}
			if r.Host != tt.host || prefix != tt.prefix || r.Ports != tt.ports {
				t.Errorf("got host %q prefix %q ports %v", r.Host, prefix, r.Ports)
			}
		})
	}
}

func TestPolicy(t *testing.T) {
	rules := func(s ...string) []Rule {
		r, err := ParseRules(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p := Policy{Allow: rules("*.pypi.org", "pypi.org:443", "1.2.3.0/24", "example.com"), Deny: rules("bad.pypi.org", "1.2.3.9", "example.com:25")}
	narrowed := p.Narrow(rules("pypi.org", "evil.com", "1.2.3.4"))
	names := []struct {
		policy Policy
		name   string
		port   uint16
		want   bool
	}{
		{p, "files.pypi.org", 443, true},
		{p, "pypi.org", 443, true},
		{p, "pypi.org", 80, false},
		{p, "pypi.org", 0, true},
		{p, "xpypi.org", 443, false},
		{p, "bad.pypi.org", 443, false},
		{p, "example.com", 25, false},
		{p, "example.com", 0, true}, // resolvable: only port 25 is denied
		{p, "other.org", 443, false},
		{narrowed, "pypi.org", 443, true},
		{narrowed, "files.pypi.org", 443, false},
		{narrowed, "evil.com", 443, false}, // a request cannot widen
	}
	for _, tt := range names {
		if got := tt.policy.NameAllowed(tt.name, tt.port); got != tt.want {
			t.Errorf("NameAllowed(%s, %d) = %v, want %v (narrowed: %v)", tt.name, tt.port, got, tt.want, tt.policy.Narrowed != nil)
		}
	}
	addrs := []struct {
		policy Policy
		addr   string
		want   bool
	}{
		{p, "1.2.3.4", true},
		{p, "1.2.3.9", false},
		{p, "1.2.4.1", false},
		{narrowed, "1.2.3.4", true},
		{narrowed, "1.2.3.5", false},
	}
	for _, tt := range addrs {
		if got := tt.policy.AddrAllowed(netip.MustParseAddr(tt.addr), 443); got != tt.want {
			t.Errorf("AddrAllowed(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestGuard(t *testing.T) {
	g := &Guard{own: []netip.Addr{netip.MustParseAddr("203.0.113.7")}, ports: map[uint16]bool{8080: true}}
	tests := []struct {
		addr   string
		port   uint16
		reason string
	}{
		{"93.184.215.14", 443, ""},
		{"127.0.0.1", 443, ReasonDeniedRange},
		{"10.1.2.3", 443, ReasonDeniedRange},
		{"172.16.0.1", 443, ReasonDeniedRange},
		{"192.168.1.1", 443, ReasonDeniedRange},
		{"169.254.169.254", 80, ReasonDeniedRange},
		{"100.64.0.1", 443, ReasonDeniedRange},
		{"224.0.0.1", 443, ReasonDeniedRange},
		{"255.255.255.255", 443, ReasonDeniedRange},
		{"0.0.0.0", 443, ReasonDeniedRange},
		{"::1", 443, ReasonDeniedRange},
		{"fd00::1", 443, ReasonDeniedRange},
		{"fe80::1", 443, ReasonDeniedRange},
		{"::ffff:10.0.0.1", 443, ReasonDeniedRange},
		{"::ffff:93.184.215.14", 443, ReasonDeniedRange},
		{"2a00:1450::1", 443, ReasonIPv6},
		{"203.0.113.7", 443, ReasonHostAddress},
		{"93.184.215.14", 8080, ReasonServerPort},
	}
	for _, tt := range tests {
		if got := g.Check(netip.MustParseAddr(tt.addr), tt.port); got != tt.reason {
			t.Errorf("Check(%s:%d) = %q, want %q", tt.addr, tt.port, got, tt.reason)
		}
	}
}

// classify tells what buf begins, as a fresh sniffer of a connection to
// name does.
func classify(buf []byte, name string) (stream, string, bool) {
	return (&sniffer{name: name}).classify(buf)
}

// clientHello returns the first bytes Go's TLS client sends for name.
func clientHello(t *testing.T, name string) []byte {
	t.Helper()
	c, s := net.Pipe()
	go func() {
		_ = tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
	}()
	defer c.Close()
	defer s.Close()
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		n, err := s.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if _, _, done := classify(buf, name); done || err != nil {
			return buf
		}
	}
}

func TestClassify(t *testing.T) {
	hello := clientHello(t, "files.pypi.org")
	tests := []struct {
		name   string
		buf    []byte
		kind   stream
		reason string
		done   bool
	}{
		{"matching server name", hello, streamTLS, "", true},
		{"half a client hello", hello[:len(hello)/2], streamTLS, "", false},
		{"garbled client hello", append([]byte{0x16, 3, 1, 0, 4}, 9, 9, 9, 9), streamTLS, ReasonBadClientHello, true},
		{"client hello without a server name", clientHello(t, ""), streamTLS, ReasonSNIMismatch, true},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: evil.com\r\n"), streamHTTP, "", true},
		{"unlisted method", []byte("PROPFIND / HTTP/1.1\r\n"), streamHTTP, "", true},
		{"absolute-form target", []byte("FOO http://evil.com/ HTTP/1.1\r\n"), streamHTTP, "", true},
		{"leading blank line", []byte("\r\nGET / HTTP/1.1\r\n"), streamOther, "", true},
		{"a tab after the method", []byte("GET\t/ HTTP/1.1\r\n"), streamOther, "", true},
		{"a request line cut short", []byte("GET / HTTP/1."), streamOther, "", false},
		{"an alert record first", []byte{0x15, 3, 1, 0, 2, 1, 90}, streamOther, "", true},
		{"h2c preface", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), streamHTTP, "", true},
		{"token and space, target not yet sent", []byte("FOO "), streamOther, "", false},
		{"another protocol", []byte("SSH-2.0-x\r\n"), streamOther, "", true},
		{"token without a space", []byte("PING\r\n\r\n"), streamOther, "", true},
		{"a method prefix", []byte("GE"), streamOther, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, reason, done := classify(tt.buf, "files.pypi.org")
			if kind != tt.kind || reason != tt.reason || done != tt.done {
				t.Errorf("got %d %q done=%v, want %d %q done=%v", kind, reason, done, tt.kind, tt.reason, tt.done)
			}
		})
	}
	if _, reason, _ := classify(clientHello(t, "evil.com"), "files.pypi.org"); reason != ReasonSNIMismatch {
		t.Errorf("a hello naming another server: %q, want %s", reason, ReasonSNIMismatch)
	}
}

// splitHello rewrites the single record of a ClientHello into records
// that carry the message cut at the given offsets of its body.
func splitHello(rec []byte, cuts ...int) []byte {
	msg := rec[5:]
	var out []byte
	from := 0
	for _, to := range append(cuts, len(msg)) {
		part := msg[from:to]
		out = append(out, 0x16, rec[1], rec[2], byte(len(part)>>8), byte(len(part)))
		out = append(out, part...)
		from = to
	}
	return out
}

// extensionsAt returns where the extensions of a ClientHello message
// start: a record cut there ends after the compression methods.
func extensionsAt(msg []byte) int {
	p := 4 + 2 + 32
	p += 1 + int(msg[p])
	p += 2 + (int(msg[p])<<8 | int(msg[p+1]))
	return p + 1 + int(msg[p])
}

// TestClientHelloOverRecords: the server name is found however the
// client splits its hello over records, and a hello that cannot be
// reassembled is refused.
func TestClientHelloOverRecords(t *testing.T) {
	evil := clientHello(t, "evil.com")
	good := clientHello(t, "files.pypi.org")
	at := extensionsAt(evil[5:])
	everyByte := make([]int, 0, len(good)-6)
	for i := 1; i < len(good)-5; i++ {
		everyByte = append(everyByte, i)
	}
	short := splitHello(good, 100)[:5+100]
	tests := []struct {
		name   string
		buf    []byte
		reason string
		done   bool
	}{
		{"another server name, cut before the extensions", splitHello(evil, at), ReasonSNIMismatch, true},
		{"another server name, cut inside the header", splitHello(evil, 2, at+3), ReasonSNIMismatch, true},
		{"the server name, one byte per record", splitHello(good, everyByte...), "", true},
		{"first record only", short, "", false},
		{"an alert before the hello is whole", append(short, 0x15, 3, 3, 0, 2, 2, 40), ReasonBadClientHello, true},
		{"an empty record", []byte{0x16, 3, 1, 0, 0}, ReasonBadClientHello, true},
		{"a record of another version", append([]byte{0x16, 0x47, 0x45}, good[3:]...), ReasonBadClientHello, true},
		{"two host names", record(hello(sniExt("files.pypi.org", "evil.com"))), ReasonBadClientHello, true},
		{"the server name extension twice", record(hello(append(sniExt("files.pypi.org"), sniExt("evil.com")...))), ReasonBadClientHello, true},
		{"bytes after the extensions", record(trailing(hello(sniExt("files.pypi.org")))), ReasonBadClientHello, true},
		{"a hand-made hello", record(hello(sniExt("files.pypi.org"))), "", true},
		{"an encrypted hello inside (ECH)", record(hello(append(sniExt("files.pypi.org"), 0xfe, 0x0d, 0, 1, 1))), ReasonBadClientHello, true},
		{"an encrypted server name (ESNI)", record(hello(append(sniExt("files.pypi.org"), 0xff, 0xce, 0, 0))), ReasonBadClientHello, true},
		{"a second hello in the record of the first", record(append(hello(sniExt("files.pypi.org")), hello(sniExt("evil.com"))...)), ReasonBadClientHello, true},
		{"a hand-made hello naming another server", record(hello(sniExt("evil.com"))), ReasonSNIMismatch, true},
		{"the name with a trailing dot", record(hello(sniExt("files.pypi.org."))), ReasonSNIMismatch, true},
		{"the name in capitals", record(hello(sniExt("FILES.PyPI.ORG"))), "", true},
		{"the name with a capital dotted I", record(hello(sniExt("f\u0130les.pypi.org"))), ReasonSNIMismatch, true},
		{"a message longer than allowed", []byte{0x16, 3, 1, 0, 4, 1, 1, 0, 0}, ReasonBadClientHello, true},
		{"a message cut short inside", append([]byte{0x16, 3, 1, 0, 8}, 1, 0, 0, 4, 3, 3, 0, 0), ReasonBadClientHello, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, reason, done := classify(tt.buf, "files.pypi.org")
			if reason != tt.reason || done != tt.done {
				t.Errorf("got %q done=%v, want %q done=%v", reason, done, tt.reason, tt.done)
			}
		})
	}
}

// sniExt is a server_name extension listing names as host names.
func sniExt(names ...string) []byte {
	var list []byte
	for _, n := range names {
		list = append(list, 0, byte(len(n)>>8), byte(len(n)))
		list = append(list, n...)
	}
	body := append([]byte{byte(len(list) >> 8), byte(len(list))}, list...)
	return append([]byte{0, 0, byte(len(body) >> 8), byte(len(body))}, body...)
}

// hello is a ClientHello message with one cipher suite and exts.
func hello(exts []byte) []byte {
	body := append([]byte{3, 3}, make([]byte, 32)...)        // version, random
	body = append(body, 0, 0, 2, 0x13, 0x01, 1, 0)           // no session id, one suite, no compression
	body = append(body, byte(len(exts)>>8), byte(len(exts))) // extensions
	body = append(body, exts...)
	return append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
}

// trailing adds a byte at the end of a handshake message, inside it.
func trailing(msg []byte) []byte {
	n := len(msg) - 4 + 1
	return append(append([]byte{msg[0], byte(n >> 16), byte(n >> 8), byte(n)}, msg[4:]...), 0)
}

// record carries msg in one handshake record.
func record(msg []byte) []byte {
	return append([]byte{0x16, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// FuzzClassify: whatever the payload sends first, classify does not
// panic, and decides once maxInspect bytes are buffered (nothing is held
// without bound).
func FuzzClassify(f *testing.F) {
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03"))
	f.Add([]byte("\x16\x03\x01\x00\x02\x01\x00\x16\x03\x01\x00\x02\x00\x04"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("\r\nPRI * HTTP/2.0\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		classify(b, "files.pypi.org")
		long := append(b, make([]byte, maxInspect)...)
		if _, _, done := classify(long, "files.pypi.org"); !done {
			t.Errorf("%d bytes starting %q are still undecided", len(long), b[:min(len(b), 16)])
		}
	})
}

// trickle is a connection whose reads return step bytes of data at a
// time, as a payload sending a byte (or a record) per segment looks to an
// egress that keeps up with it.
type trickle struct {
	net.Conn
	data []byte
	step int
}

func (c *trickle) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *trickle) SetReadDeadline(time.Time) error { return nil }

// TestInspectTrickled: what a payload trickles in costs the egress time
// in proportion to its bytes, not to their square: the longest request
// line sent a byte per segment, and a ClientHello as long as allowed sent
// in records of one byte each, a record per segment, are each told within
// a fraction of a second (a look at the whole buffer on each read took
// seconds).
func TestInspectTrickled(t *testing.T) {
	line := []byte("GET /" + strings.Repeat("a", http1.MaxHead))
	var records []byte
	n := maxHello - 4 // the longest message allowed, never sent whole
	msg := []byte{1, byte(n >> 16), byte(n >> 8), byte(n)}
	for len(records) < maxInspect+6 {
		records = append(records, 0x16, 3, 1, 0, 1, msg[0])
		msg = append(msg[1:], 0)
	}
	tests := []struct {
		name   string
		conn   *trickle
		kind   stream
		reason string
	}{
		{"a request line a byte at a time", &trickle{data: line, step: 1}, streamOther, ""},
		{"a hello a one-byte record at a time", &trickle{data: records, step: 6}, streamTLS, ReasonBadClientHello},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			op := inspect(tt.conn, "files.pypi.org")
			took := time.Since(start)
			if op.kind != tt.kind || op.reason != tt.reason || len(tt.conn.data) == 0 {
				t.Errorf("got %d %q with %d bytes unread, want %d %q decided before the end", op.kind, op.reason, len(tt.conn.data), tt.kind, tt.reason)
			}
			if took > 300*time.Millisecond {
				t.Errorf("took %s", took)
			}
			t.Logf("%d bytes read in %s", len(op.first), took)
		})
	}
}
