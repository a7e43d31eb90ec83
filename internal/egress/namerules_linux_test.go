package egress

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// pyTLS is Python for a TLS exchange over a socket of its own: the
// ClientHello may be split into records of `split` bytes and preceded by
// `prefix`, as no TLS library sends it.
const pyTLS = `
import socket, ssl
def resplit(data, k):
    n = int.from_bytes(data[3:5], "big")
    body, rest, out = data[5:5 + n], data[5 + n:], b""
    for i in range(0, len(body), k):
        part = body[i:i + k]
        out += data[:3] + len(part).to_bytes(2, "big") + part
    return out + rest
def tls_get(host, sni, ca, prefix=b"", split=0, port=443):
    ctx = ssl.create_default_context(cafile=ca)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    s = socket.create_connection((host, port), timeout=10)
    first = [True]
    def flush():
        data = out.read()
        if data and first[0]:
            first[0] = False
            data = prefix + (resplit(data, split) if split else data)
        if data:
            s.sendall(data)
    def pump():
        b = s.recv(65536)
        if not b:
            raise ConnectionError("closed")
        inc.write(b)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            flush()
            pump()
    obj.write(b"GET / HTTP/1.1\r\nHost: " + sni.encode() + b"\r\nConnection: close\r\n\r\n")
    flush()
    got = b""
    while True:
        try:
            b = obj.read(65536)
            if not b:
                break
            got += b
        except ssl.SSLWantReadError:
            try:
                pump()
            except ConnectionError:
                break
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
    s.close()
    return got
`

// pyTLS13 is Python for a TLS 1.3 exchange by hand, with ClientHellos as
// no TLS library sends them: a server name of any bytes, and a second
// ClientHello, after the server asked for one, naming another server. It
// offers only what it needs (P-256 with the generator as its key share,
// so that the shared secret is the x of the server's share, and
// ChaCha20-Poly1305) and checks nothing of the server's.
const pyTLS13 = `
import hashlib, hmac, os, socket, struct
M32 = 0xffffffff
def _u8(b): return bytes([len(b)]) + b
def _u16(b): return struct.pack(">H", len(b)) + b
def _ext(t, body): return struct.pack(">H", t) + _u16(body)
def _rotl(v, c): return ((v << c) & M32) | (v >> (32 - c))
def _chacha(key, counter, nonce):
    s = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574, *struct.unpack("<8I", key), counter, *struct.unpack("<3I", nonce)]
    w = s[:]
    def qr(a, b, c, d):
        w[a] = (w[a] + w[b]) & M32; w[d] = _rotl(w[d] ^ w[a], 16)
        w[c] = (w[c] + w[d]) & M32; w[b] = _rotl(w[b] ^ w[c], 12)
        w[a] = (w[a] + w[b]) & M32; w[d] = _rotl(w[d] ^ w[a], 8)
        w[c] = (w[c] + w[d]) & M32; w[b] = _rotl(w[b] ^ w[c], 7)
    for _ in range(10):
        qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15)
        qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14)
    return struct.pack("<16I", *[(a + b) & M32 for a, b in zip(w, s)])
def _xor(key, nonce, data):
    out = bytearray()
    for i in range(0, len(data), 64):
        out += bytes(a ^ b for a, b in zip(data[i:i + 64], _chacha(key, 1 + i // 64, nonce)))
    return bytes(out)
def _pad(b): return b + bytes(-len(b) % 16)
def _tag(key, nonce, aad, ct):
    otk = _chacha(key, 0, nonce)
    r = int.from_bytes(otk[:16], "little") & 0x0ffffffc0ffffffc0ffffffc0fffffff
    msg, acc, p = _pad(aad) + _pad(ct) + struct.pack("<QQ", len(aad), len(ct)), 0, (1 << 130) - 5
    for i in range(0, len(msg), 16):
        acc = (acc + int.from_bytes(msg[i:i + 16] + b"\x01", "little")) * r % p
    return ((acc + int.from_bytes(otk[16:32], "little")) % (1 << 128)).to_bytes(16, "little")
def _label(secret, label, ctx, n):
    info, out, t, i = struct.pack(">H", n) + _u8(b"tls13 " + label) + _u8(ctx), b"", b"", 1
    while len(out) < n:
        t = hmac.new(secret, t + info + bytes([i]), hashlib.sha256).digest(); out += t; i += 1
    return out[:n]
def _extract(salt, ikm): return hmac.new(salt, ikm, hashlib.sha256).digest()
# P-256 key share of the private key 1: the generator. The shared secret is the x of the server's share.
_G = bytes.fromhex("046B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C2964FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5")
_HRR = hashlib.sha256(b"HelloRetryRequest").digest()
class _Keys:
    def __init__(self, secret):
        self.key, self.iv, self.seq = _label(secret, b"key", b"", 32), _label(secret, b"iv", b"", 12), 0
    def nonce(self):
        n = bytes(a ^ b for a, b in zip(self.iv, self.seq.to_bytes(12, "big"))); self.seq += 1; return n
def tls13_get(host, port, sni1, sni2=None, request=b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
    """A TLS 1.3 exchange by hand: the first ClientHello names sni1 (bytes); with sni2 it offers
    no key share, so that the server asks again, and the second ClientHello names sni2.
    Returns the application data the server sent back."""
    rnd, sid = os.urandom(32), os.urandom(32)
    def hello(sni, share):
        e = _ext(0, _u16(b"\x00" + _u16(sni))) + _ext(10, _u16(struct.pack(">H", 23)))
        e += _ext(13, _u16(struct.pack(">HHH", 0x0403, 0x0804, 0x0401))) + _ext(43, _u8(b"\x03\x04"))
        e += _ext(51, _u16(struct.pack(">H", 23) + _u16(_G) if share else b""))
        body = b"\x03\x03" + rnd + _u8(sid) + _u16(b"\x13\x03") + _u8(b"\x00") + _u16(e)
        return b"\x01" + len(body).to_bytes(3, "big") + body
    s = socket.create_connection((host, port), timeout=10)
    buf = b""
    def record():
        nonlocal buf
        while len(buf) < 5 or len(buf) < 5 + int.from_bytes(buf[3:5], "big"):
            b = s.recv(65536)
            if not b:
                raise ConnectionError("closed")
            buf += b
        n = 5 + int.from_bytes(buf[3:5], "big")
        r, buf = buf[:n], buf[n:]
        return r
    def plain_handshake():
        while True:
            r = record()
            if r[0] == 0x16:
                return r[5:]
            if r[0] != 0x14:
                raise ConnectionError("record %r" % r[:7])
    ch = hello(sni1, sni2 is None)
    s.sendall(b"\x16\x03\x01" + _u16(ch))
    sh = plain_handshake()
    transcript = ch
    if sh[6:38] == _HRR:
        transcript = b"\xfe\x00\x00\x20" + hashlib.sha256(ch).digest() + sh
        ch = hello(sni2, True)
        s.sendall(b"\x14\x03\x03\x00\x01\x01\x16\x03\x03" + _u16(ch))
        transcript += ch
        sh = plain_handshake()
    transcript += sh
    i = sh.index(b"\x00\x33\x00\x45\x00\x17\x00\x41")  # key_share: secp256r1, 65 bytes
    shared = sh[i + 9:i + 41]
    zero = bytes(32)
    hs = _extract(_label(_extract(zero, zero), b"derived", hashlib.sha256().digest(), 32), shared)
    th = lambda: hashlib.sha256(transcript).digest()
    c_hs, s_hs = _label(hs, b"c hs traffic", th(), 32), _label(hs, b"s hs traffic", th(), 32)
    master = _extract(_label(hs, b"derived", hashlib.sha256().digest(), 32), zero)
    sk, ck = _Keys(s_hs), _Keys(c_hs)
    def open_record(keys):
        while True:
            r = record()
            if r[0] == 0x17:
                pt = _xor(keys.key, keys.nonce(), r[5:-16]).rstrip(b"\x00")
                return pt[-1], pt[:-1]
            if r[0] != 0x14:
                raise ConnectionError("record %r" % r[:7])
    def seal(keys, typ, data):
        n, pt = keys.nonce(), data + bytes([typ])
        aad = b"\x17\x03\x03" + struct.pack(">H", len(pt) + 16)
        ct = _xor(keys.key, n, pt)
        return aad + ct + _tag(keys.key, n, aad, ct)
    msgs = b""
    while True:
        typ, pt = open_record(sk)
        if typ == 0x15:
            raise ConnectionError("alert %r" % pt)
        msgs += pt
        done = False
        while len(msgs) >= 4 and len(msgs) >= 4 + int.from_bytes(msgs[1:4], "big"):
            n = 4 + int.from_bytes(msgs[1:4], "big")
            m, msgs = msgs[:n], msgs[n:]
            if m[0] == 20:  # the server's Finished
                transcript += m
                done = True
                break
            transcript += m
        if done:
            break
    c_ap, s_ap = _label(master, b"c ap traffic", th(), 32), _label(master, b"s ap traffic", th(), 32)
    fin = hmac.new(_label(c_hs, b"finished", b"", 32), th(), hashlib.sha256).digest()
    s.sendall(b"\x14\x03\x03\x00\x01\x01" + seal(ck, 0x16, b"\x14\x00\x00\x20" + fin))
    ak, sak = _Keys(c_ap), _Keys(s_ap)
    s.sendall(seal(ak, 0x17, request))
    got = b""
    try:
        while True:
            typ, pt = open_record(sak)
            if typ == 0x17:
                got += pt
            elif typ == 0x15:
                break
    except (ConnectionError, OSError):
        pass
    s.close()
    return got
`

// attacks is the payload of TestNameRulesFailClosed: argv is the host to
// attack (allowed.test through the egress, the test host's address
// directly), the CA file and the attack's name; it prints whether the
// other site answered.
const attacks = pyTLS + pyTLS13 + `
import sys
H, CA, ATTACK = sys.argv[1], sys.argv[2], sys.argv[3]
S = b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n"
OK = b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
def exchange(data, port=8000):
    s = socket.create_connection((H, port), timeout=10)
    s.sendall(data)
    s.settimeout(3)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got
chunk = b"%x\r\n" % len(S)
ALERT = bytes([0x15, 3, 1, 0, 2, 1, 90])  # a warning alert record (user_canceled)
run = {
    "tls_alert_first": lambda: tls_get(H, "other.test", CA, prefix=ALERT),
    "leading_space": lambda: exchange(b" " + S),
    "tabs": lambda: exchange(S.replace(b" ", b"\t", 2)),
    "vertical_tab_later": lambda: exchange(OK + S.replace(b" ", b"\x0b", 1)),
    "te_cl_http11": lambda: exchange(b"POST /cl HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" % len(chunk) + chunk + S + b"\r\n0\r\n\r\n"),
    "te_cl_http10": lambda: exchange(b"POST /te HTTP/1.0\r\nHost: allowed.test\r\nConnection: keep-alive\r\n"
        b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n0\r\n\r\n" % (5 + len(S)) + S),
    "content_on_get": lambda: exchange(b"GET / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n\r\n" % len(S) + S),
    # U+0130 (İ) is "i" to Go's strings.ToLower, not to a server
    # comparing names byte by byte, which answers as its default site.
    "sni_unicode_case": lambda: tls13_get(H, 4443, "b\u0130g.test".encode()),
    # TLS 1.3: the server asks for a second ClientHello (none of the key
    # shares offered suits it), which names the other site.
    "hello_retry": lambda: tls13_get(H, 8443, b"allowed.test", b"other.test"),
}[ATTACK]
try:
    got = run()
except OSError as e:
    got = b""
print("reached" if b"hello other.test" in got else "refused")
`

// TestNameRulesFailClosed: with only a name allowed, a second site on the
// same address (a Go TLS server choosing its site by server name, and
// Python's lenient http.server) is reachable by none of the ways found in
// issue 29 — each of which does reach it without the egress — and each
// is refused with its reason in the events.
func TestNameRulesFailClosed(t *testing.T) {
	w := egresstest.New(t)
	cases := []struct {
		attack string
		port   uint16
		reason string
		name   string // the name allowed, allowed.test if ""
	}{
		{"tls_alert_first", 443, ReasonUnrecognised, ""},
		{"leading_space", egresstest.LenientPort, ReasonUnrecognised, ""},
		{"tabs", egresstest.LenientPort, ReasonUnrecognised, ""},
		{"vertical_tab_later", egresstest.LenientPort, ReasonBadHTTPRequest, ""},
		{"te_cl_http11", egresstest.LenientPort, ReasonBadHTTPRequest, ""},
		{"te_cl_http10", egresstest.LenientPort, ReasonBadHTTPRequest, ""},
		{"content_on_get", egresstest.LenientPort, ReasonBadHTTPRequest, ""},
		{"sni_unicode_case", egresstest.DefaultSitePort, ReasonSNIMismatch, "big.test"},
		{"hello_retry", egresstest.OpenSSLPort, ReasonSNIMismatch, ""},
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, w.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.attack, func(t *testing.T) {
			if c.name == "" {
				c.name = "allowed.test"
			}
			// Without the egress the attack works: the test can fail.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-c", attacks, egresstest.PublicHost, ca, c.attack)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "reached\n" {
				t.Fatalf("directly, the attack did not reach the other site (%v): %s", err, out)
			}
			res, rec := runEgress(t, w, testConfig(t, w, c.name), attacks, c.name, "/work/ca.pem", c.attack)
			if string(res.Stdout) != "refused\n" {
				t.Errorf("through the egress: %q (stderr %q)", res.Stdout, res.Stderr)
			}
			found := false
			for _, ev := range rec.events {
				found = found || ev.Proto == "tcp" && ev.Host == c.name && ev.Port == c.port &&
					ev.Verdict == VerdictDeny && ev.Reason == c.reason
			}
			if !found {
				t.Errorf("no refusal with reason %s on port %d: %+v", c.reason, c.port, rec.events)
			}
		})
	}
}

// pyProbe is Python that prints name=outcome of a probe, or its error.
const pyProbe = `
def probe(name, f):
    try:
        print(f"{name}={f()}")
    except Exception as e:
        print(f"{name}=ERR {type(e).__name__} {e}")
`

// clients is the payload of TestOrdinaryClients: ordinary clients of the
// standard library and the system, through names only.
const clients = pyTLS + pyProbe + `
import subprocess, sys, urllib.request
CA = "/work/ca.pem"
def urlopen(url, data=None):
    ctx = ssl.create_default_context(cafile=CA)
    return urllib.request.urlopen(url, data=data, timeout=10, context=ctx).read().decode()
def keep_alive():
    import http.client
    c = http.client.HTTPConnection("allowed.test", 8000, timeout=10)
    out = []
    for body in (None, b"x" * 100000, None):
        c.request("POST" if body else "GET", "/", body=body)
        out.append(c.getresponse().read().decode())
    return "|".join(out)
def chunked_upload():
    import http.client
    c = http.client.HTTPConnection("allowed.test", 80, timeout=10)
    c.request("POST", "/", body=iter([b"a" * 10, b"b" * 70000]), encode_chunked=True)
    return c.getresponse().read().decode()
def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return p.stdout.strip().splitlines()[-1] if p.returncode == 0 else f"exit {p.returncode}: {p.stderr[-300:]}"
probe("urllib_http", lambda: urlopen("http://allowed.test/"))
probe("urllib_https", lambda: urlopen("https://allowed.test/"))
probe("urllib_post", lambda: urlopen("http://allowed.test:8000/p", data=b"y" * 5000))
probe("keep_alive", keep_alive)
probe("chunked_upload", chunked_upload)
probe("tls_split", lambda: tls_get("allowed.test", "allowed.test", CA, split=7).split(b"\r\n\r\n", 1)[1].decode())
probe("hello_retry", lambda: urlopen("https://allowed.test:8443/"))
probe("curl_http", lambda: run("curl", "-sS", "http://allowed.test/"))
probe("curl_https", lambda: run("curl", "-sS", "--cacert", CA, "https://allowed.test/"))
def pip():
    r = run(sys.executable, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
        "--index-url", "http://allowed.test:8080/simple/", "--trusted-host", "allowed.test", "--target", "/work/site", "` + egresstest.IndexProject + `")
    if r.startswith("exit"):
        return r
    return run(sys.executable, "-c", "import sys; sys.path.insert(0, '/work/site'); import egress_probe; print(egress_probe.VALUE)")
probe("pip", pip)
`

// TestOrdinaryClients: what ordinary clients send through names alone
// still goes through: urllib (GET, POST, HTTPS, HTTPS to a server that
// asks for a second ClientHello), http.client keeping a connection alive
// and uploading in chunks, a ClientHello split over records, curl, and
// pip installing from the test host's index.
func TestOrdinaryClients(t *testing.T) {
	w := egresstest.New(t)
	cfg := testConfig(t, w, "allowed.test")
	res, rec := runEgress(t, w, cfg, clients)
	got := egresstest.Lines(string(res.Stdout))
	want := map[string]string{
		"urllib_http":    "hello allowed.test",
		"urllib_https":   "hello allowed.test",
		"urllib_post":    "hello allowed.test:8000",
		"keep_alive":     "hello allowed.test:8000|hello allowed.test:8000|hello allowed.test:8000",
		"chunked_upload": "hello allowed.test",
		"tls_split":      "hello allowed.test",
		"hello_retry":    "hello allowed.test",
		"curl_http":      "hello allowed.test",
		"curl_https":     "hello allowed.test",
		"pip":            "installed",
	}
	checkProbes(t, got, want, res, rec)
}

// pyRequests is the payload of TestRequestsAndHTTPX.
const pyRequests = pyProbe + `
import ssl, requests, httpx
CA = "/work/ca.pem"
def session():
    with requests.Session() as s:
        return "|".join(s.get("http://allowed.test:8000/").text for _ in range(3))
probe("requests_http", lambda: requests.get("http://allowed.test/", timeout=10).text)
probe("requests_https", lambda: requests.get("https://allowed.test/", verify=CA, timeout=10).text)
probe("requests_post", lambda: requests.post("http://allowed.test:8000/", data=b"z" * 200000, timeout=10).text)
probe("requests_chunked", lambda: requests.post("http://allowed.test/", data=iter([b"a" * 10, b"b" * 20]), timeout=10).text)
probe("requests_session", session)
probe("httpx_http", lambda: httpx.get("http://allowed.test/", timeout=10).text)
probe("httpx_https", lambda: httpx.get("https://allowed.test/", verify=ssl.create_default_context(cafile=CA), timeout=10).text)
probe("httpx_post", lambda: httpx.post("http://allowed.test:8000/", content=b"z" * 100000, timeout=10).text)
`

// TestRequestsAndHTTPX: requests and httpx (installed from PyPI before
// the suite isolates itself) go through names alone.
func TestRequestsAndHTTPX(t *testing.T) {
	w := egresstest.New(t)
	dir := egresstest.Clients(t)
	cfg := testConfig(t, w, "allowed.test")
	res, rec := runSpec(t, w, cfg, sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", pyRequests},
		Env: []string{"PYTHONPATH=" + dir}, Mounts: []sandbox.Mount{{Source: dir}}})
	got := egresstest.Lines(string(res.Stdout))
	want := map[string]string{
		"requests_http":    "hello allowed.test",
		"requests_https":   "hello allowed.test",
		"requests_post":    "hello allowed.test:8000",
		"requests_chunked": "hello allowed.test",
		"requests_session": "hello allowed.test:8000|hello allowed.test:8000|hello allowed.test:8000",
		"httpx_http":       "hello allowed.test",
		"httpx_https":      "hello allowed.test",
		"httpx_post":       "hello allowed.test:8000",
	}
	checkProbes(t, got, want, res, rec)
}

// checkProbes compares a payload's probes with want; no connection may
// have been refused.
func checkProbes(t *testing.T, got, want map[string]string, res sandbox.Result, rec *recorder) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for _, ev := range rec.events {
		if ev.Verdict != VerdictAllow {
			t.Errorf("refused: %+v", ev)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
}

// lookups is the payload of TestSequentialLookups: n lookups of a name,
// one after another, each from a socket of its own (A and AAAA), timed.
const lookups = `
import socket, sys, time
n, answered, slowest = int(sys.argv[1]), 0, 0.0
for i in range(n):
    t = time.monotonic()
    try:
        socket.getaddrinfo("allowed.test", 80, type=socket.SOCK_STREAM)
        answered += 1
    except OSError as e:
        print("lookup", i, "failed:", e, file=sys.stderr)
    slowest = max(slowest, time.monotonic() - t)
print(answered, round(slowest, 3))
`

// TestSequentialLookups: 1,000 lookups of an allowed name one after
// another all answer, none after a resolver's retry (a DNS flow ends
// once it answered: sequential lookups are never counted as concurrent).
func TestSequentialLookups(t *testing.T) {
	w := egresstest.New(t)
	cfg := testConfig(t, w, "allowed.test")
	start := time.Now()
	res, rec := runEgress(t, w, cfg, lookups, "1000")
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 || f[0] != "1000" {
		t.Fatalf("answered %q of 1000 (stderr %q)", res.Stdout, res.Stderr)
	}
	// The jail's resolver waits 2 s for an answer before it asks again.
	if slowest, _ := strconv.ParseFloat(f[1], 64); slowest >= 2 {
		t.Errorf("the slowest lookup took %.1f s: a query went unanswered", slowest)
	}
	for _, ev := range rec.events {
		if ev.Verdict != VerdictAllow {
			t.Errorf("refused: %+v", ev)
		}
	}
	t.Logf("1000 lookups in %s, slowest %s s", time.Since(start).Round(time.Millisecond), f[1])
}

// slowResolver answers as its map does, after a delay.
type slowResolver struct {
	StaticResolver
	delay time.Duration
}

func (s slowResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.StaticResolver.LookupNetIP(ctx, network, host)
}

// burst is the payload of TestDNSFlowLimit: argv[1] queries for
// allowed.test at once, each from a socket of its own; it prints how many
// were answered with each RCODE.
const burst = `
import collections, socket, struct, sys
n = int(sys.argv[1])
q = lambda i: struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"\x07allowed\x04test\x00" + struct.pack(">HH", 1, 1)
socks = []
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(q(i), ("198.18.0.1", 53))
    socks.append(s)
rcodes = collections.Counter()
for s in socks:
    try:
        rcodes[s.recv(512)[3] & 15] += 1
    except OSError:
        rcodes["none"] += 1
print(" ".join(f"{k}:{v}" for k, v in sorted(rcodes.items(), key=str)))
`

// TestDNSFlowLimit: lookups beyond maxDNSFlows in flight at once (here
// held by a slow upstream resolver) are answered at once with SERVFAIL
// and reported, never dropped in silence; the others are answered.
func TestDNSFlowLimit(t *testing.T) {
	w := egresstest.New(t)
	cfg := testConfig(t, w, "allowed.test")
	cfg.Resolver = slowResolver{StaticResolver(w.Hosts), 2 * time.Second}
	extra := 16
	res, rec := runEgress(t, w, cfg, burst, strconv.Itoa(maxDNSFlows+extra))
	want := fmt.Sprintf("0:%d 2:%d\n", maxDNSFlows, extra) // NOERROR, SERVFAIL
	if string(res.Stdout) != want {
		t.Errorf("answers by RCODE %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	if !rec.find("dns", "allowed.test", VerdictDeny, ReasonDNSFlowLimit) {
		t.Errorf("no event for the refused lookups: %+v", rec.events)
	}
}
