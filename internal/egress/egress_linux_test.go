package egress

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// recorder collects an egress's events and limit.
type recorder struct {
	mu     sync.Mutex
	events []Event
	limit  string
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		Event: func(ev Event) { r.mu.Lock(); r.events = append(r.events, ev); r.mu.Unlock() },
		Limit: func(why string) { r.mu.Lock(); r.limit = why; r.mu.Unlock() },
	}
}

// find returns the first event for host with proto and reason.
func (r *recorder) find(proto, host, verdict, reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e Event) bool {
		return e.Proto == proto && e.Host == host && e.Verdict == verdict && e.Reason == reason
	})
}

// runEgress runs code in a jail with network through an egress of cfg
// narrowed to nothing more, and returns its stdout with the events.
func runEgress(t testing.TB, w *egresstest.World, cfg Config, code string, args ...string) (sandbox.Result, *recorder) {
	t.Helper()
	return runSpec(t, w, cfg, sandbox.Spec{Argv: append([]string{"/usr/bin/python3", "-c", code}, args...)})
}

// runSpec runs spec (its Argv, and Env and Mounts added to the usual) in
// a jail as runEgress does.
func runSpec(t testing.TB, w *egresstest.World, cfg Config, spec sandbox.Spec) (sandbox.Result, *recorder) {
	t.Helper()
	return runGranted(t, w, cfg, Grant{Policy: cfg.Policy}, spec)
}

// runGranted is runSpec with what g grants the execution; spec.Files,
// when given, replace the world's CA in ca.pem.
func runGranted(t testing.TB, w *egresstest.World, cfg Config, g Grant, spec sandbox.Spec) (sandbox.Result, *recorder) {
	t.Helper()
	files := spec.Files
	if files == nil {
		files = []sandbox.File{{Path: "ca.pem", Data: w.CAPEM}}
	}
	m, err := sandbox.New(sandbox.Config{CgroupParent: fmt.Sprintf("pyexec-egress-test-%d", pid())})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooks := rec.hooks()
	limitHook := hooks.Limit
	hooks.Limit = func(why string) { limitHook(why); cancel() }
	eg := New(cfg, g, hooks)
	res, err := m.Run(ctx, sandbox.Spec{
		Argv:    spec.Argv,
		Env:     append([]string{"PATH=/usr/bin:/bin", "HOME=/work", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}, spec.Env...),
		Mounts:  spec.Mounts,
		Files:   files,
		Network: true,
		Egress:  eg,
		Limits:  sandbox.Limits{WallTime: 40 * time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eg.Close(); err != nil {
		t.Errorf("closing the egress: %v", err)
	}
	m.Wait()
	if res.Status == sandbox.StatusSetupError {
		t.Fatalf("setup error: %s", res.Reason)
	}
	return res, rec
}

func testConfig(t testing.TB, w *egresstest.World, allow ...string) Config {
	t.Helper()
	rules, err := ParseRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGuard([]uint16{uint16(w.API.Addr().(*net.TCPAddr).Port)})
	if err != nil {
		t.Fatal(err)
	}
	return Config{Policy: Policy{Allow: rules}, Guard: g, Resolver: StaticResolver(w.Hosts),
		Limits: Limits{ConnectTimeout: 3 * time.Second}}
}

// probes is the payload: each probe prints name=outcome.
const probes = `
import socket, ssl, urllib.request, sys
API = int(sys.argv[1])
CA = "/work/ca.pem"
def probe(name, f):
    try:
        print(f"{name}={f()}")
    except Exception as e:
        print(f"{name}=ERR {type(e).__name__}")
def get(url):
    ctx = ssl.create_default_context(cafile=CA)
    return urllib.request.urlopen(url, timeout=10, context=ctx).read().decode()
def tcp(host, port, send=b"", family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect((host, port))
    if send:
        s.sendall(send)
    data = s.recv(100)
    s.close()
    return "OK " + data.decode(errors="replace").split("\r\n")[0] if data else "EOF"
def tls(server_hostname):
    s = socket.create_connection(("allowed.test", 443), timeout=10)
    ctx = ssl.create_default_context(cafile=CA)
    ctx.check_hostname = False
    t = ctx.wrap_socket(s, server_hostname=server_hostname)
    t.close()
    return "OK"
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"x", ("203.0.113.2", 9999))
    return "OK " + s.recv(10).decode()
probe("http", lambda: get("http://allowed.test/"))
probe("https", lambda: get("https://allowed.test/"))
probe("raw", lambda: tcp("allowed.test", 8000, b"PING\r\n\r\n"))
probe("raw_by_address", lambda: tcp("allowed.test", 80, b"PING\r\n\r\n"))
probe("raw_ip", lambda: tcp("203.0.113.2", 80, b"PING\r\n\r\n"))
probe("other_name", lambda: socket.getaddrinfo("other.test", 80))
probe("ip_unlisted", lambda: tcp("203.0.113.3", 80))
probe("api_public", lambda: tcp("203.0.113.2", API))
probe("api_loopback", lambda: tcp("127.0.0.1", API))
probe("loopback_80", lambda: tcp("127.0.0.1", 80))
probe("metadata", lambda: tcp("169.254.169.254", 80))
probe("metadata_name", lambda: socket.getaddrinfo("meta.test", 80))
probe("private", lambda: tcp("10.99.0.2", 80))
probe("mapped", lambda: tcp("::ffff:10.99.0.2", 80, family=socket.AF_INET6))
probe("sni", lambda: tls("other.test"))
probe("sni_ok", lambda: tls("allowed.test"))
probe("host", lambda: tcp("allowed.test", 80, b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"))
probe("host_absolute", lambda: tcp("allowed.test", 80, b"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n"))
probe("host_bare_lf", lambda: tcp("allowed.test", 80, b"GET / HTTP/1.1\r\nX: a\nHost: other.test\r\n\r\n"))
probe("host_missing", lambda: tcp("allowed.test", 80, b"GET / HTTP/1.0\r\n\r\n"))
probe("rebind", lambda: socket.getaddrinfo("rebind.test", 80))
probe("udp", udp)
probe("ipv6", lambda: tcp("2a01::1", 80, family=socket.AF_INET6))
`

func TestEgressPolicy(t *testing.T) {
	w := egresstest.New(t)
	api := strconv.Itoa(w.API.Addr().(*net.TCPAddr).Port)
	cfg := testConfig(t, w, "allowed.test", "rebind.test", "meta.test", egresstest.PublicHost+":"+api, egresstest.PublicHost+":80",
		egresstest.PrivateHost, egresstest.MetadataHost)
	res, rec := runEgress(t, w, cfg, probes, api)
	t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	got := egresstest.Lines(string(res.Stdout))
	want := map[string]string{
		"http":           "hello allowed.test",
		"https":          "hello allowed.test",
		"raw":            "EOF",
		"raw_by_address": "OK HTTP/1.1 400 Bad Request",
		"raw_ip":         "OK HTTP/1.1 400 Bad Request",
		"other_name":     "ERR gaierror",
		"ip_unlisted":    "ERR ConnectionRefusedError",
		"api_public":     "ERR ConnectionRefusedError",
		"api_loopback":   "ERR ConnectionRefusedError",
		"loopback_80":    "ERR ConnectionRefusedError",
		"metadata":       "ERR ConnectionRefusedError",
		"metadata_name":  "ERR gaierror",
		"private":        "ERR ConnectionRefusedError",
		"mapped":         "ERR ConnectionRefusedError",
		"sni_ok":         "OK",
		"host":           "EOF",
		"host_absolute":  "EOF",
		"host_bare_lf":   "EOF",
		"host_missing":   "EOF",
		"rebind":         "ERR gaierror",
		"udp":            "ERR TimeoutError",
		"ipv6":           "ERR ConnectionRefusedError",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if s := got["sni"]; s == "OK" || s == "" {
		t.Errorf("sni: a TLS handshake naming another server went through: %q", s)
	}
	if n := w.APIConns.Load(); n != 0 {
		t.Errorf("the loopback API listener of the server side accepted %d connections", n)
	}
	events := []struct{ proto, host, verdict, reason string }{
		{"tcp", "allowed.test", VerdictAllow, ""},
		{"dns", "other.test", VerdictDeny, ReasonNotAllowed},
		{"tcp", egresstest.UnlistedHost, VerdictDeny, ReasonNotAllowed},
		{"tcp", egresstest.PublicHost, VerdictDeny, ReasonServerPort},
		{"tcp", egresstest.MetadataHost, VerdictDeny, ReasonDeniedRange},
		{"dns", "meta.test", VerdictDeny, ReasonPrivateAddress},
		{"tcp", egresstest.PrivateHost, VerdictDeny, ReasonDeniedRange},
		{"tcp", "allowed.test", VerdictDeny, ReasonSNIMismatch},
		{"tcp", "allowed.test", VerdictDeny, ReasonUnrecognised},
		{"tcp", "allowed.test", VerdictDeny, ReasonHostMismatch},
		{"dns", "rebind.test", VerdictDeny, ReasonPrivateAddress},
		{"udp", egresstest.PublicHost, VerdictDeny, ReasonUDP},
		{"tcp", "2a01::1", VerdictDeny, ReasonIPv6},
	}
	for _, e := range events {
		if !rec.find(e.proto, e.host, e.verdict, e.reason) {
			t.Errorf("no %s event for %s with verdict %s and reason %q", e.proto, e.host, e.verdict, e.reason)
		}
	}
	if t.Failed() {
		for _, e := range rec.events {
			t.Logf("event %+v", e)
		}
	}
}

func TestEgressLimits(t *testing.T) {
	w := egresstest.New(t)
	cases := []struct {
		name   string
		limits Limits
		code   string
		reason string
	}{
		{"bytes in", Limits{BytesIn: 256 << 10}, `
import urllib.request
urllib.request.urlopen("http://big.test/big", timeout=10).read()
print("downloaded")`, ReasonBytesInLimit},
		{"bytes out", Limits{BytesOut: 64 << 10}, `
import socket
s = socket.create_connection(("big.test", 80), timeout=10)
s.sendall(b"POST / HTTP/1.1\r\nHost: big.test\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000000)
print("sent")`, ReasonBytesOutLimit},
		{"connections", Limits{MaxConns: 2}, `
import socket
held = [socket.create_connection(("big.test", 80), timeout=10) for _ in range(3)]
print("opened")`, ReasonConnectionLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t, w, "big.test")
			cfg.Limits = c.limits
			cfg.Limits.ConnectTimeout = 3 * time.Second
			start := time.Now()
			res, rec := runEgress(t, w, cfg, c.code)
			if rec.limit != c.reason {
				t.Errorf("limit: got %q, want %q (stdout %q, stderr %q)", rec.limit, c.reason, res.Stdout, res.Stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the run took %s: the limit did not end it", d)
			}
			if !rec.find("tcp", "big.test", VerdictDeny, c.reason) {
				t.Errorf("no event with reason %s: %+v", c.reason, rec.events)
			}
		})
	}
}

// TestNoEgressNoRoute: without an egress a jail has no route out, with
// network asked for or not; only its own loopback exists.
func TestNoEgressNoRoute(t *testing.T) {
	w := egresstest.New(t)
	m, err := sandbox.New(sandbox.Config{CgroupParent: fmt.Sprintf("pyexec-egress-test-%d", pid())})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Wait()
	code := `
import socket
try:
    socket.create_connection(("` + egresstest.PublicHost + `", 80), timeout=5)
    print("connected")
except OSError as e:
    print("errno", e.errno)
print(sorted(n for _, n in socket.if_nameindex()))`
	for _, network := range []bool{false, true} {
		res, err := m.Run(context.Background(), sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", code},
			Env: []string{"PATH=/usr/bin:/bin"}, Network: network, Limits: sandbox.Limits{WallTime: 20 * time.Second}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := "errno 101\n['lo']\n" // ENETUNREACH
		if string(res.Stdout) != want {
			t.Errorf("network=%v: got %q (stderr %q), want %q", network, res.Stdout, res.Stderr, want)
		}
	}
	_ = w
}

// TestNothingOutlivesTheExecution: connections a payload holds open are
// cut at the destination once its execution ends (here by its timeout).
func TestNothingOutlivesTheExecution(t *testing.T) {
	w := egresstest.New(t)
	cfg := testConfig(t, w, "allowed.test")
	code := `
import socket, time
held = [socket.create_connection(("allowed.test", ` + strconv.Itoa(egresstest.HoldPort) + `), timeout=10) for _ in range(3)]
print("open", flush=True)
time.sleep(60)`
	m, err := sandbox.New(sandbox.Config{CgroupParent: fmt.Sprintf("pyexec-egress-test-%d", pid())})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Wait()
	eg := New(cfg, Grant{Policy: cfg.Policy}, Hooks{})
	res, err := m.Run(context.Background(), sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", code},
		Env: []string{"PATH=/usr/bin:/bin"}, Network: true, Egress: eg, Limits: sandbox.Limits{WallTime: 3 * time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sandbox.StatusTimeout || string(res.Stdout) != "open\n" {
		t.Fatalf("status %s stdout %q stderr %q", res.Status, res.Stdout, res.Stderr)
	}
	if err := eg.Close(); err != nil {
		t.Error(err)
	}
	if n := w.HeldMax.Load(); n != 3 {
		t.Errorf("the test host saw %d connections at once, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Held.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := w.Held.Load(); n != 0 {
		t.Errorf("%d connections still open at the destination after the execution ended", n)
	}
}
