package egress

import (
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
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
		if _, done := classify(buf, name); done || err != nil {
			return buf
		}
	}
}

func TestClassify(t *testing.T) {
	hello := clientHello(t, "files.pypi.org")
	tests := []struct {
		name   string
		buf    []byte
		reason string
		done   bool
	}{
		{"matching server name", hello, "", true},
		{"half a client hello", hello[:len(hello)/2], "", false},
		{"garbled client hello", append([]byte{0x16, 3, 1, 0, 4}, 9, 9, 9, 9), ReasonBadClientHello, true},
		{"matching Host", []byte("GET / HTTP/1.1\r\nHost: files.pypi.org:443\r\n\r\n"), "", true},
		{"other Host", []byte("GET / HTTP/1.1\r\nhost: evil.com\r\n\r\n"), ReasonHostMismatch, true},
		{"head not complete", []byte("GET / HTTP/1.1\r\nHost: evil.com\r\n"), "", false},
		{"another protocol", []byte("SSH-2.0-x\r\n"), "", true},
		{"a method prefix", []byte("GE"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, done := classify(tt.buf, "files.pypi.org")
			if reason != tt.reason || done != tt.done {
				t.Errorf("got %q done=%v, want %q done=%v", reason, done, tt.reason, tt.done)
			}
		})
	}
	if reason, _ := classify(clientHello(t, "evil.com"), "files.pypi.org"); reason != ReasonSNIMismatch {
		t.Errorf("a hello naming another server: %q, want %s", reason, ReasonSNIMismatch)
	}
}
