package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Addresses of the test world. "The internet" is one test host in a
// network namespace of its own, joined to the suite's namespace by a veth
// pair: it carries a public address, a private one and the metadata
// address, and serves HTTP on 80, HTTPS on 443 and UDP echo on 9999.
const (
	publicHost   = "203.0.113.2"
	unlistedHost = "203.0.113.3"
	privateHost  = "10.99.0.2"
	metadataHost = "169.254.169.254"
)

// world is the test world as a test sees it.
type world struct {
	caPEM    []byte        // the CA the HTTPS server's certificate chains to
	api      net.Listener  // stands in for the server's API on loopback
	apiConns *atomic.Int64 // connections the API listener accepted
	resolver StaticResolver
}

// needWorld builds the test world, or skips without root.
func needWorld(t *testing.T) *world {
	t.Helper()
	if os.Getenv(worldEnv) == "" {
		t.Skip("needs root: runs in a network namespace of its own with test hosts (CI runs as root)")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("needs /usr/bin/python3: %v", err)
	}
	w := &world{apiConns: &atomic.Int64{}, resolver: StaticResolver{}}
	host := makeHostNS(t)
	cert, ca := testCert(t, "allowed.test", "other.test")
	w.caPEM = ca
	inNS(t, host, func() {
		serveHTTP(t, "tcp4", ":80", nil)
		serveHTTP(t, "tcp4", ":443", &tls.Config{Certificates: []tls.Certificate{cert}})
		serveUDPEcho(t, ":9999")
	})
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
			w.apiConns.Add(1)
			c.Close()
		}
	}()
	w.api = api
	for name, addr := range map[string]string{
		"allowed.test": publicHost, "other.test": publicHost, "big.test": publicHost,
		"rebind.test": privateHost, "meta.test": metadataHost,
	} {
		w.resolver[name] = append(w.resolver[name], mustAddr(addr))
	}
	return w
}

var netnsSeq atomic.Int64

// makeHostNS makes the test host's namespace and the veth pair to it.
func makeHostNS(t *testing.T) netns.NsHandle {
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
	configure(t, *h, hl, "lo", publicHost+"/24", privateHost+"/24", metadataHost+"/16")
	return host
}

// configure addresses link and raises it and the loopback.
func configure(t *testing.T, h netlink.Handle, link netlink.Link, lo string, addrs ...string) {
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
func inNS(t *testing.T, ns netns.NsHandle, f func()) {
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

// serveHTTP answers every request with the Host it named, and /big with
// 4 MiB.
func serveHTTP(t *testing.T, network, addr string, tlsConf *tls.Config) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		l = tls.NewListener(l, tlsConf)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(make([]byte, 4<<20))
			return
		}
		fmt.Fprintf(w, "hello %s", r.Host)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func serveUDPEcho(t *testing.T, addr string) {
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

// testCert makes a CA and a certificate it signed for names.
func testCert(t *testing.T, names ...string) (tls.Certificate, []byte) {
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
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// lines splits a payload's output into its "case=outcome" pairs.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}
