package http1

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The differential tests feed random and mutated request streams to this
// package and to a strict server's reading (Go's net/http, with the
// checks its server adds to http.ReadRequest), and the heads this package
// accepts to Python's lenient http.server. Whatever this package accepts
// must be read by them as the same requests for the same hosts.

// evil is a request for another host, 28 bytes (0x1c).
const evil = "GET / HTTP/1.1\r\nHost: evil\r\n\r\n"

// seeds are streams as ordinary clients send them, and the shapes of
// known attacks.
var seeds = []string{
	"GET / HTTP/1.1\r\nHost: ok.test\r\nUser-Agent: python-requests/2.32.3\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n",
	"GET /simple/pkg/ HTTP/1.1\r\nHost: ok.test:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
	"GET /x?y=1 HTTP/1.0\r\nHost: ok.test\r\nConnection: keep-alive\r\n\r\n",
	"GET http://ok.test/p HTTP/1.1\r\nHost: ok.test\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: ok.test\r\n\r\n",
	"POST /u HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhelloGET / HTTP/1.1\r\nHost: ok.test\r\n\r\n",
	"POST /u HTTP/1.1\r\nHost: ok.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: ok.test\r\n\r\n",
	// A server reading Content-Length sees a second request (TE.CL).
	"POST /u HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\n" + evil + "\r\n0\r\n\r\n",
	// A server reading Transfer-Encoding sees a second request (CL.TE),
	// on HTTP/1.1 and on HTTP/1.0.
	"POST /u HTTP/1.1\r\nHost: ok.test\r\nContent-Length: 33\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + evil,
	"POST /u HTTP/1.0\r\nHost: ok.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 33\r\n\r\n0\r\n\r\n" + evil,
	"GET / HTTP/1.1\r\nHost: ok.test\r\n\r\nGET\t/ HTTP/1.1\r\nHost: evil\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\r\nHost: ok.test\r\nY: b\r\n\r\n",
}

// pieces are what mutations insert.
var pieces = []string{
	" ", "\t", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x00", "\x1c", "\x85", "\xa0", ":", ",", ";", "@", "#", "/",
	"?", "[", "]", "_", "-", "0", "9", "f", "HTTP/1.1", "HTTP/1.0", "http://", "evil", "ok.test",
	"\x85Host: evil", "\x0bHost: evil", "\x1eHost: evil", "\xa0Host: evil",
	"Host: evil\r\n", "Host:evil\r\n", "host: ok.test\r\n", " Host: evil\r\n", "\tHost: evil\r\n", "X: a\nHost: evil\r\n",
	"Transfer-Encoding: chunked\r\n", "Content-Length: 5\r\n", "Content-Length: 0\r\n", "Content-Length: 29\r\n",
	"Transfer-Encoding: chunked, chunked\r\n", "Connection: close\r\n", "Upgrade: h2c\r\n",
	"GET / HTTP/1.1\r\nHost: evil\r\n\r\n", "0\r\n\r\n", "5\r\nhello\r\n", "\r\n\r\n",
}

// mutate changes stream in one to four random ways.
func mutate(rng *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	for range 1 + rng.IntN(4) {
		at := rng.IntN(len(b) + 1)
		switch rng.IntN(7) {
		case 0, 1:
			b = append(b[:at:at], append([]byte(pieces[rng.IntN(len(pieces))]), b[at:]...)...)
		case 2:
			if at < len(b) {
				b = append(b[:at:at], b[at+1+rng.IntN(min(4, len(b)-at)):]...)
			}
		case 3:
			if at < len(b) {
				b[at] = byte(rng.IntN(256))
			}
		case 4:
			if at < len(b) {
				b[at] ^= 0x20 // flip case
			}
		case 5: // repeat a line
			lines := bytes.SplitAfter(b, []byte("\r\n"))
			i := rng.IntN(len(lines))
			b = bytes.Join(append(lines[:i+1:i+1], lines[i:]...), nil)
		case 6: // join two streams
			b = append(b, seeds[rng.IntN(len(seeds))]...)
		}
	}
	return b
}

// read is one request as a reader took it.
type read struct {
	host   string // the authority of an absolute-form target, else Host
	method string
	target string
}

// ours reads stream with this package until it refuses or the stream
// ends, as the egress does: it returns the requests it accepted, their
// heads, and the bytes it passed on (the heads and the content after
// each, up to where it refused).
func ours(stream []byte) (got []read, heads []string, forwarded []byte) {
	br := bufio.NewReader(bytes.NewReader(stream))
	var out bytes.Buffer
	for {
		raw, h, err := ReadHead(br)
		if err != nil {
			return got, heads, out.Bytes()
		}
		host := h.Host
		if h.Authority != "" {
			host = h.Authority
		}
		got = append(got, read{host: host, method: h.Method, target: h.Target})
		heads = append(heads, string(raw))
		out.Write(raw)
		if CopyBody(&out, br, h) != nil {
			return got, heads, out.Bytes()
		}
	}
}

// goServer reads stream as Go's net/http server does, until it refuses
// or the stream ends.
func goServer(stream []byte) []read {
	br := bufio.NewReader(bytes.NewReader(stream))
	var got []read
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return got
		}
		// The checks net/http's server adds to ReadRequest (its count of
		// Host fields aside: ReadRequest drops the field).
		if req.ProtoAtLeast(1, 1) && req.Host == "" || strings.Trim(req.Host, hostBytes) != "" {
			return got
		}
		for k, vv := range req.Header {
			if k == "" || strings.IndexFunc(k, func(c rune) bool { return c > 0x7f || !isTchar(byte(c)) }) >= 0 {
				return got
			}
			for _, v := range vv {
				if strings.IndexFunc(v, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) >= 0 {
					return got
				}
			}
		}
		got = append(got, read{host: req.Host, method: req.Method, target: req.RequestURI})
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return got
		}
	}
}

// hostBytes are the bytes net/http's server accepts in a Host.
const hostBytes = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!$%&()*+,-.:;=[]_~'"

// disagreement describes how a server's reading of what this package
// passed on of stream differs from this package's, "" when it does not:
// each request the server reads there must be the request this package
// accepted at the same place, for the same host. (The server may read
// fewer: it may refuse more, or stop after "Connection: close".)
func disagreement(stream []byte) string {
	mine, _, forwarded := ours(stream)
	theirs := goServer(forwarded)
	for i, r := range theirs {
		switch {
		case i >= len(mine):
			return fmt.Sprintf("the server read request %d (%+v), which was not checked", i, r)
		case !strings.EqualFold(r.host, mine[i].host) || r.method != mine[i].method || r.target != mine[i].target:
			return fmt.Sprintf("request %d read as %+v, by the server as %+v", i, mine[i], r)
		}
	}
	return ""
}

// TestDifferential runs mutated streams through both readers (a fixed
// seed, so a failure repeats; PYEXEC_DIFF_SEED picks another) and then
// the heads this package accepted through Python's http.server.
func TestDifferential(t *testing.T) {
	seed := uint64(29)
	if s := os.Getenv("PYEXEC_DIFF_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	const cases = 40000
	budget := time.Now().Add(15 * time.Second)
	accepted, bad := map[string]bool{}, 0
	n := 0
	for ; n < cases && time.Now().Before(budget); n++ {
		stream := mutate(rng, []byte(seeds[rng.IntN(len(seeds))]))
		if d := disagreement(stream); d != "" {
			if bad++; bad <= 10 {
				t.Errorf("%q: %s", stream, d)
			}
		}
		if _, heads, _ := ours(stream); len(accepted) < 50000 {
			for _, h := range heads {
				accepted[h] = true
			}
		}
	}
	t.Logf("%d streams (seed %d), %d disagreements, %d distinct heads accepted", n, seed, bad, len(accepted))
	if n < 5000 {
		t.Errorf("only %d streams within the time budget", n)
	}
	lenient(t, accepted)
}

// lenientReader parses each head it is given (a 4-byte length, then the
// head) with http.server's own request parsing and prints what it read.
const lenientReader = `
import http.server, io, struct, sys
class H(http.server.BaseHTTPRequestHandler):
    def __init__(self, raw):
        self.rfile, self.wfile = io.BytesIO(raw), io.BytesIO()
        self.client_address, self.server, self.close_connection = ("", 0), None, True
        self.raw_requestline = self.rfile.readline(65537)
        self.ok = self.parse_request()
    def log_message(self, *a):
        pass
inp = sys.stdin.buffer
while True:
    n = inp.read(4)
    if not n:
        break
    h = H(inp.read(struct.unpack(">I", n)[0]))
    if not h.ok:
        print("refused")
        continue
    hosts = h.headers.get_all("Host") or []
    print(repr((h.command, h.path, h.request_version, hosts)))
`

// lenient checks that Python's http.server reads every head this package
// accepted with the same method, target and single Host: it splits the
// request line on any whitespace and lines on more than CRLF, so a head
// that fooled a strict reader could read differently there.
func lenient(t *testing.T, heads map[string]bool) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Logf("no /usr/bin/python3: http.server's reading not compared")
		return
	}
	var in bytes.Buffer
	var list []string
	for h := range heads {
		list = append(list, h)
		in.Write(binary.BigEndian.AppendUint32(nil, uint32(len(h))))
		in.WriteString(h)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", lenientReader)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(list) {
		t.Fatalf("python read %d heads of %d", len(lines), len(list))
	}
	bad := 0
	for i, raw := range list {
		h, err := ParseHead([]byte(raw))
		if err != nil {
			t.Fatalf("%q: accepted before, now %v", raw, err)
		}
		version := fmt.Sprintf("HTTP/1.%d", h.Minor)
		target := h.Target
		if strings.HasPrefix(target, "//") { // http.server's guard against open redirects
			target = "/" + strings.TrimLeft(target, "/")
		}
		hosts := "[]"
		if h.Host != "" {
			hosts = "[" + pyRepr(h.Host) + "]"
		}
		want := fmt.Sprintf("(%s, %s, %s, %s)", pyRepr(h.Method), pyRepr(target), pyRepr(version), hosts)
		if lines[i] != want {
			if bad++; bad <= 10 {
				t.Errorf("%q: http.server read %s, want %s", raw, lines[i], want)
			}
		}
	}
	t.Logf("%d heads compared with http.server, %d disagreements", len(list), bad)
}

// pyRepr is Python's repr of a printable ASCII string.
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// FuzzDifferential: no stream makes the two readers disagree.
//
//	go test -fuzz FuzzDifferential ./internal/egress/http1
func FuzzDifferential(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		if d := disagreement(stream); d != "" {
			t.Errorf("%q: %s", stream, d)
		}
	})
}
