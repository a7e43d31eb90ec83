package egresstest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
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
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/usr/bin/python3", "-c", lenientServer)
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
