package egresstest

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// Ports of the test host besides HTTP, HTTPS, HoldPort and UDP echo.
const (
	// LenientPort serves Python's http.server as small applications use
	// it: GET is answered without reading content, POST reads its content
	// by Content-Length, and on paths under /te by Transfer-Encoding when
	// it says chunked, on HTTP/1.0 too. Every answer is "hello <Host>".
	LenientPort = 8000
	// IndexPort serves a package index (PEP 503) at /simple/ with one
	// project, IndexProject.
	IndexPort = 8080
	// DefaultSitePort serves HTTPS as port 443 does, except that a hello
	// naming no site here gets other.test's, as a front end's default
	// server does.
	DefaultSitePort = 4443
	// OpenSSLPort serves HTTPS with Python's ssl module (OpenSSL), which
	// chooses the site in its server-name callback, as OpenSSL-based
	// front ends do: OpenSSL calls it again for the second ClientHello of
	// a TLS 1.3 handshake the server asked to retry. It takes only P-256
	// key shares, so that it asks clients offering X25519 first (Python's,
	// curl's) to retry. Every answer is "hello <site>".
	OpenSSLPort = 8443
)

// IndexProject is the one project of the test host's index: a wheel
// whose module egress_probe has VALUE = "installed".
const IndexProject = "egress-probe"

// listen opens a TCP listener on port of every address of the namespace
// the calling thread is in.
func listen(t testing.TB, port int) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp4", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serve answers on l with h until the test ends.
func serve(t testing.TB, l net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// indexHandler serves, by proxy, an index of pyenvtest (which listens on
// the suite's loopback) holding IndexProject.
func indexHandler(t testing.TB) http.Handler {
	t.Helper()
	ix := pyenvtest.NewIndex(t, pyenvtest.Wheel{Name: IndexProject, Version: "1.0",
		Files: map[string]string{"egress_probe/__init__.py": "VALUE = \"installed\"\n"}})
	u, err := url.Parse(ix.URL)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
}

// lenientServer is the program behind LenientPort; its listening socket
// is fd 3.
const lenientServer = `
import http.server, socket

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def content(self):
        if self.path.startswith("/te") and self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return
                self.rfile.read(size + 2)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self):
        msg = ("hello %s" % self.headers.get("Host", "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.content()
        self.answer()

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.serve_forever()
`

// serveLenient runs the lenient server on l (a listener of the test
// host's namespace) until the test ends.
func serveLenient(t testing.TB, l net.Listener) {
	t.Helper()
	runPython(t, l, "-c", lenientServer)
}

// runPython runs /usr/bin/python3 with args and l as its fd 3 until the
// test ends.
func runPython(t testing.TB, l net.Listener, args ...string) {
	t.Helper()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/usr/bin/python3", args...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

// opensslServer is the program behind OpenSSLPort; its listening socket
// is fd 3, argv names the directory of the sites' certificates (a file
// per site, certificate and key) and the sites.
const opensslServer = `
import socket, ssl, sys, threading
def context(site):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain("%s/%s.pem" % (sys.argv[1], site))
    c.set_ecdh_curve("prime256v1")  # so that clients offering X25519 first are asked to retry
    return c
sites = {s: context(s) for s in sys.argv[2:]}
front = context(sys.argv[2])
def choose(conn, name, ctx):
    if name not in sites:
        return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
    conn.context, conn.site = sites[name], name
front.sni_callback = choose
def serve(c):
    try:
        c.settimeout(10)
        with front.wrap_socket(c, server_side=True) as t:
            head = b""
            while b"\r\n\r\n" not in head:
                b = t.recv(4096)
                if not b:
                    return
                head += b
            msg = ("hello %s" % t.site).encode()
            t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(msg) + msg)
    except OSError:
        pass
listener = socket.socket(fileno=3)
while True:
    c, _ = listener.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// serveOpenSSL runs the OpenSSL server on l (a listener of the test
// host's namespace) with certs until the test ends.
func serveOpenSSL(t testing.TB, l net.Listener, certs map[string]*tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-c", opensslServer, dir}
	for site, c := range certs {
		key, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		pemData := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key})...)
		if err := os.WriteFile(filepath.Join(dir, site+".pem"), pemData, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, site)
	}
	runPython(t, l, args...)
}
