package pyenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// indexProxy is a build jail's only way out: an HTTP proxy that tunnels
// (CONNECT) to, or fetches (absolute-form GET and HEAD) from, the package
// index hosts and refuses everything else with 403.
type indexProxy struct {
	allowed   map[string]bool // host:port
	log       *slog.Logger
	refused   func(hostport string)
	transport *http.Transport
}

// indexHosts returns the host:port of each http(s) index URL. PyPI serves
// its files from files.pythonhosted.org, which goes with pypi.org.
func indexHosts(urls []string) map[string]bool {
	out := map[string]bool{}
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			continue
		}
		out[hostPort(p)] = true
		if p.Hostname() == "pypi.org" {
			out["files.pythonhosted.org:443"] = true
		}
	}
	return out
}

// hostPort is u's host with its explicit or default port, lower case.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// serve accepts connections on l until it is closed, and waits for the
// ones in progress; ctx ending closes them.
func (p *indexProxy) serve(ctx context.Context, l net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			defer c.Close()
			p.handle(ctx, c)
		}()
	}
}

func (p *indexProxy) handle(ctx context.Context, c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.Method == http.MethodConnect {
			p.tunnel(ctx, c, br, req)
			return
		}
		if (req.Method != http.MethodGet && req.Method != http.MethodHead) || !req.URL.IsAbs() ||
			(req.URL.Scheme != "http" && req.URL.Scheme != "https") {
			p.deny(c, req.Method+" "+req.RequestURI)
			return
		}
		if hp := hostPort(req.URL); !p.allowed[hp] {
			p.deny(c, hp)
			return
		}
		out := req.Clone(ctx)
		out.RequestURI = ""
		out.Header.Del("Proxy-Connection")
		out.Header.Del("Proxy-Authorization")
		resp, err := p.transport.RoundTrip(out)
		if err != nil {
			writeStatus(c, http.StatusBadGateway, err.Error())
			return
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// tunnel connects the client to an allowed host:port.
func (p *indexProxy) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request) {
	target := strings.ToLower(req.RequestURI)
	if !p.allowed[target] {
		p.deny(c, target)
		return
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	up, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		writeStatus(c, http.StatusBadGateway, err.Error())
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, br) // what the client sent, buffered or not
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
}

func (p *indexProxy) deny(c net.Conn, what string) {
	p.log.Warn("source build: refused a connection outside the package index", "target", what)
	if p.refused != nil {
		p.refused(what)
	}
	writeStatus(c, http.StatusForbidden, fmt.Sprintf("pyexec: a source build may only reach the package index; %s refused", what))
}

func writeStatus(c net.Conn, code int, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
}
