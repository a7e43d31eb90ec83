package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Addresses of the test world. "The internet" is one test host in a
// network namespace of its own, joined to the suite's namespace by a veth
// pair: it carries a public address, a private one and the metadata
// address, and serves HTTP on 80 (Go's net/http), HTTPS on 443 (Go's
// crypto/tls, a site per server name) and on DefaultSitePort, HTTPS by
// OpenSSL on OpenSSLPort, a lenient HTTP server on LenientPort (Python's
// http.server), a package index on IndexPort and UDP echo on 9999.
// Addresses of the test host.
const (
	PublicHost   = "203.0.113.2"
	UnlistedHost = "203.0.113.3"
	PrivateHost  = "10.99.0.2"
	MetadataHost = "169.254.169.254"
)

// World is the test world as a test sees it.
type World struct {
	CAPEM    []byte        // the CA the HTTPS server's certificate chains to
	API      net.Listener  // stands in for the server's API on loopback
	APIConns *atomic.Int64 // connections the API listener accepted
	// Held counts the connections open now to the test host's port
	// HoldPort, which reads until its peer closes; HeldMax the most at once.
	Held, HeldMax *atomic.Int64
	// Hosts names the test host: allowed.test, other.test and big.test
	// are PublicHost, rebind.test is PrivateHost, meta.test MetadataHost.
	Hosts map[string][]netip.Addr
}

// Env marks a test binary that runs in a network namespace of its own.
const Env = "PYEXEC_EGRESS_TEST_WORLD"

// Isolated reports whether this process runs in the test's own network
// namespace (see Isolate).
func Isolated() bool { return os.Getenv(Env) != "" }

// Isolate runs the test binary again, in a fresh network namespace, with
// args (say, -test.run of one test), and returns its exit code. Only root
// can; the caller checks.
func Isolate(args []string) (int, error) {
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Env = append(os.Environ(), Env+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// RanIsolated runs the test t again in a test binary of its own, in a
// fresh network namespace (Isolate), and reports true once it has (t
// failed if that run failed); false when this process already is the
// isolated one, or is not root (New then skips), and t goes on here.
func RanIsolated(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 || Isolated() {
		return false
	}
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	code, err := Isolate(args)
	if err != nil || code != 0 {
		t.Fatalf("the test in its own network namespace failed (exit %d, %v)", code, err)
	}
	return true
}

// New builds the test world, or skips the test when this process is not
// isolated (not root) or has no /usr/bin/python3.
func New(t testing.TB) *World {
	t.Helper()
	if !Isolated() {
		t.Skip("needs root: runs in a network namespace of its own with test hosts (CI runs as root)")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("needs /usr/bin/python3: %v", err)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun for the jails' egress devices: %v", err)
	}
	w := &World{APIConns: &atomic.Int64{}, Held: &atomic.Int64{}, HeldMax: &atomic.Int64{}, Hosts: map[string][]netip.Addr{}}
	host := makeHostNS(t)
	certs, ca := siteCerts(t, "allowed.test", "other.test", "big.test")
	w.CAPEM = ca
	index := indexHandler(t)
	var lenient, openssl net.Listener
	inNS(t, host, func() {
		serveHTTP(t, "tcp4", ":80", nil)
		serveHTTP(t, "tcp4", ":443", &sites{certs: certs})
		serveHTTP(t, "tcp4", fmt.Sprintf(":%d", DefaultSitePort), &sites{certs: certs, fallback: "other.test"})
		serveUDPEcho(t, ":9999")
		serveHold(t, w)
		lenient = listen(t, LenientPort)
		openssl = listen(t, OpenSSLPort)
		serve(t, listen(t, IndexPort), index)
	})
	serveLenient(t, lenient)
	serveOpenSSL(t, openssl, certs)
	api, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	go func() {
		for {
			c, err := api.Accept()
			if err != nil {
				return
			}
			w.APIConns.Add(1)
			c.Close()
		}
	}()
	w.API = api
	for name, addr := range map[string]string{
		"allowed.test": PublicHost, "other.test": PublicHost, "big.test": PublicHost,
		"rebind.test": PrivateHost, "meta.test": MetadataHost,
	} {
		w.Hosts[name] = append(w.Hosts[name], netip.MustParseAddr(addr))
	}
	return w
}

var netnsSeq atomic.Int64

// makeHostNS makes the test host's namespace and the veth pair to it.
func makeHostNS(t testing.TB) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	host, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err) // the thread dies with the locked goroutine
	}
	t.Cleanup(func() { host.Close() })
	n := netnsSeq.Add(1)
	suite, peer := fmt.Sprintf("ws%d", n), fmt.Sprintf("wh%d", n)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: suite}, PeerName: peer}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(suite); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	pl, err := netlink.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(pl, int(host)); err != nil {
		t.Fatal(err)
	}
	sl, err := netlink.LinkByName(suite)
	if err != nil {
		t.Fatal(err)
	}
	configure(t, netlink.Handle{}, sl, "lo", "203.0.113.1/24", "10.99.0.1/24", "169.254.169.1/16")
	h, err := netlink.NewHandleAt(host)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	hl, err := h.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	configure(t, *h, hl, "lo", PublicHost+"/24", PrivateHost+"/24", MetadataHost+"/16")
	return host
}

// configure addresses link and raises it and the loopback.
func configure(t testing.TB, h netlink.Handle, link netlink.Link, lo string, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		ipn, err := netlink.ParseAddr(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddrAdd(link, ipn); err != nil {
			t.Fatalf("adding %s: %v", a, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	if l, err := h.LinkByName(lo); err == nil {
		_ = h.LinkSetUp(l)
	}
}

// inNS runs f on a thread in ns; sockets f opens stay in ns.
func inNS(t testing.TB, ns netns.NsHandle, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		f()
		if err := netns.Set(orig); err != nil {
			t.Error(err)
			return // the thread stays locked and dies with the goroutine
		}
		runtime.UnlockOSThread()
	}()
	<-done
}

// serveHTTP answers every request with the site it asked for (the Host it
// named; over TLS, with s, the site its server name chose, as a front end
// that routes by SNI does), /big with 4 MiB and /10m with 10 MiB.
func serveHTTP(t testing.TB, network, addr string, s *sites) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if s != nil {
		l = tls.NewListener(l, s.config())
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write(make([]byte, 4<<20))
			return
		case "/10m":
			w.Write(make([]byte, 10<<20))
			return
		case "/auth":
			// What a secret's destination received, as hashes (Hash):
			// how many Authorization fields, the first, the query and the
			// content.
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%d %s %s %s", len(r.Header.Values("Authorization")), Hash(r.Header.Get("Authorization")),
				Hash(r.URL.RawQuery), Hash(string(body)))
			return
		case "/reflect":
			// A destination that sends the Authorization it received
			// back, in a header and in content split over chunks.
			a := r.Header.Get("Authorization")
			w.Header().Set("X-Reflect", a)
			io.WriteString(w, a[:len(a)/2])
			w.(http.Flusher).Flush()
			io.WriteString(w, a[len(a)/2:]+"|"+a)
			return
		case "/range":
			// A reflecting destination that honours Range (as a file
			// or blob server does): a part of the value at a time.
			http.ServeContent(w, r, "", time.Time{}, strings.NewReader(r.Header.Get("Authorization")))
			return
		case "/partial":
			// A destination that answers with a part of what it
			// reflects whatever was asked.
			a := r.Header.Get("Authorization")
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-9/%d", len(a)))
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, a[:10])
			return
		case "/echo/json":
			// A destination that reflects the Authorization it received
			// as JSON (Go's encoder escapes " \ < > &).
			json.NewEncoder(w).Encode(map[string]string{"authorization": r.Header.Get("Authorization")})
			return
		case "/echo/query":
			// A destination that reflects it percent-encoded (in a
			// redirect's Location, as a query parameter).
			q := "authorization=" + url.QueryEscape(r.Header.Get("Authorization"))
			w.Header().Set("Location", "/next?"+q)
			io.WriteString(w, q)
			return
		case "/gzip":
			// A destination that compresses whatever was asked.
			w.Header().Set("Content-Encoding", "gzip")
			w.Write([]byte{0x1f, 0x8b})
			return
		}
		site := r.Host
		if r.TLS != nil {
			site, _ = s.site(r.TLS.ServerName)
		}
		fmt.Fprintf(w, "hello %s", site)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// Hash is how the test host reports what it received: the first 16 hex
// digits of its SHA-256.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// HoldPort is where the test host holds connections open (World.Held).
const HoldPort = 7000

func serveHold(t testing.TB, w *World) {
	t.Helper()
	l, err := net.Listen("tcp4", fmt.Sprintf(":%d", HoldPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := w.Held.Add(1)
			for m := w.HeldMax.Load(); n > m && !w.HeldMax.CompareAndSwap(m, n); m = w.HeldMax.Load() {
			}
			go func() {
				defer w.Held.Add(-1)
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
}

func serveUDPEcho(t testing.TB, addr string) {
	t.Helper()
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
}

// siteCerts makes a CA and, for each of names, a certificate the CA
// signed for that name alone.
func siteCerts(t testing.TB, names ...string) (map[string]*tls.Certificate, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	certs := map[string]*tls.Certificate{}
	for i, name := range names {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(2 + i)), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		certs[name] = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	return certs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// sites are the sites of a TLS front end: a certificate per name, and the
// site a hello naming none of them gets (its default server); without
// one, such a hello is refused.
type sites struct {
	certs    map[string]*tls.Certificate
	fallback string
}

// site is the site a server name chooses.
func (s *sites) site(name string) (string, bool) {
	if _, ok := s.certs[name]; ok {
		return name, true
	}
	return s.fallback, s.fallback != ""
}

func (s *sites) config() *tls.Config {
	return &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if site, ok := s.site(hello.ServerName); ok {
			return s.certs[site], nil
		}
		return nil, fmt.Errorf("no site %q here", hello.ServerName)
	}}
}

// Lines splits a payload's output into its "case=outcome" pairs.
func Lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}
