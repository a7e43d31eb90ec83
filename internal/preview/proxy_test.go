package preview

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// app is what a session serves, on the loopback: /echo answers the
// request it got as JSON and sets a cookie; /ws switches to an echo of
// every byte.
func app(t *testing.T) net.Addr {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "app", Value: "1"})
		w.Header().Set("Clear-Site-Data", `"storage"`)
		_ = json.NewEncoder(w).Encode(map[string]any{"uri": r.RequestURI, "host": r.Host, "header": r.Header})
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = rw.Flush()
		_, _ = io.Copy(c, rw)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr()
}

// proxyTo serves the proxy at /p/ in front of the app, each request on a
// connection of its own through m.
func proxyTo(t *testing.T, appAddr net.Addr, m *Meter, sandboxed bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := net.Dial("tcp", appAddr.String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		Serve(w, r, Forward{Conn: m.Wrap(c), Prefix: "/p/", Sandboxed: sandboxed,
			OnError: func(w http.ResponseWriter, err error) {
				http.Error(w, "no answer: "+err.Error(), http.StatusBadGateway)
			}})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func testMeter(t *testing.T, lim Limits) *Meter {
	t.Helper()
	m, err := NewMeter(lim)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var wide = Limits{Conns: 4, KeyConns: 8, Bytes: 1 << 20, Idle: time.Minute}

// TestServeKeepsTheViewersKey: the app gets the request's path below the
// prefix and its query, and neither the viewer's API key (either header)
// nor pyexec's cookies; its own cookies go through.
func TestServeKeepsTheViewersKey(t *testing.T) {
	addr := proxyTo(t, app(t), testMeter(t, wide), false)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/p/echo/a%2Fb?q=1", nil)
	req.Header.Set("Authorization", "Bearer secret-key")
	req.Header.Set("X-API-Key", "secret-key")
	req.Header.Set("Cookie", "pyexec_key=secret-key; theme=dark; PYEXEC-other=secret-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.Contains(string(body), "secret-key") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var got struct {
		URI    string
		Host   string
		Header http.Header
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.URI != "/echo/a%2Fb?q=1" || got.Host != addr || got.Header.Get("Cookie") != "theme=dark" ||
		got.Header.Get("X-Forwarded-Prefix") != "/p" {
		t.Errorf("the app got %s", body)
	}
	if resp.Header.Get("Set-Cookie") == "" || resp.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("on a preview host the app's answer is its own: %v", resp.Header)
	}
}

// TestServeSandboxed: on the API's origin, the app's pages run sandboxed
// and set no cookie there.
func TestServeSandboxed(t *testing.T) {
	addr := proxyTo(t, app(t), testMeter(t, wide), true)
	resp, err := http.Get("http://" + addr + "/p/echo/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if c := resp.Header.Values("Set-Cookie"); len(c) > 0 {
		t.Errorf("Set-Cookie %q on the API's origin", c)
	}
	if c := resp.Header.Get("Clear-Site-Data"); c != "" {
		t.Errorf("Clear-Site-Data %q on the API's origin: it would wipe the playground's key", c)
	}
}

// upgrade opens a WebSocket-like upgraded connection through the proxy.
func upgrade(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, _ = io.WriteString(c, "GET /p/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c, br
}

func TestServeUpgrade(t *testing.T) {
	c, br := upgrade(t, proxyTo(t, app(t), testMeter(t, wide), false))
	for _, msg := range []string{"hello\n", "again\n"} {
		_, _ = io.WriteString(c, msg)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if got, err := br.ReadString('\n'); got != msg {
			t.Fatalf("echo %q, %v; want %q", got, err, msg)
		}
	}
}

// TestLimitsEndAnUpgradedConnection: past its bytes, or quiet past the
// idle time, the connection is closed.
func TestLimitsEndAnUpgradedConnection(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		c, br := upgrade(t, proxyTo(t, app(t), testMeter(t, Limits{Conns: 1, KeyConns: 1, Bytes: 300, Idle: time.Minute}), false))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		line := strings.Repeat("x", 99) + "\n"
		got := 0
		for range 10 {
			if _, err := io.WriteString(c, line); err != nil {
				break
			}
			if _, err := br.ReadString('\n'); err != nil {
				break
			}
			got += len(line)
		}
		// The request and the 101 count too: fewer than 300 bytes echo.
		if got >= 300 {
			t.Errorf("%d bytes echoed through a 300-byte limit", got)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c, br := upgrade(t, proxyTo(t, app(t), testMeter(t, Limits{Conns: 1, KeyConns: 1, Bytes: 1 << 20, Idle: 200 * time.Millisecond}), false))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the app sent a byte nobody asked for")
		} else if errors.Is(err, io.EOF) && time.Since(start) > 5*time.Second {
			t.Errorf("closed only after %v", time.Since(start))
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("a quiet connection lasted %v, idle limit 200ms", time.Since(start))
		}
	})
}

func TestMeterConns(t *testing.T) {
	m := testMeter(t, Limits{Conns: 2, KeyConns: 8, Bytes: 1, Idle: time.Second})
	r1, err1 := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false)
	_, err2 := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false); !errors.Is(err, ErrTooManyConns) {
		t.Errorf("third: %v", err)
	}
	if r, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 81}, false); err != nil {
		t.Errorf("another port: %v", err)
	} else {
		r()
	}
	r1()
	r1() // twice is once
	if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false); !errors.Is(err, ErrTooManyConns) {
		t.Errorf("a double release freed two: %v", err)
	}
}

// TestMeterKeepsTheOwnersConns: the holders of a port's preview URLs
// taking every connection they may leave the owner's key its own.
func TestMeterKeepsTheOwnersConns(t *testing.T) {
	m := testMeter(t, Limits{Conns: 2, KeyConns: 8, Bytes: 1, Idle: time.Second})
	for i := range 2 {
		if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, true); err != nil {
			t.Fatalf("URL connection %d: %v", i, err)
		}
	}
	if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, true); !errors.Is(err, ErrTooManyConns) {
		t.Errorf("a third URL connection: %v", err)
	}
	for i := range 2 {
		if _, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80}, false); err != nil {
			t.Errorf("the owner's connection %d with the URLs' taken: %v", i, err)
		}
	}
}

// previewHostApp answers what an app might to take over a shared
// preview host: cookies for the whole host or its parent, a service
// worker for every path, a wipe of the host's storage, a password prompt,
// and an early hint carrying cookies before its answer.
func previewHostApp(t *testing.T) net.Addr {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "early=1; Path=/")
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Set-Cookie")
		w.Header().Del("Link")
		w.Header().Add("Set-Cookie", "tossed=1; Domain=example.com; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "mine=2")
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Clear-Site-Data", `"storage"`)
		w.Header().Set("WWW-Authenticate", `Basic realm="pyexec API key"`)
		_ = json.NewEncoder(w).Encode(r.Header)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr()
}

// interim reads through the proxy at addr the answers to one request,
// the 1xx ones included, and the headers the app got.
func interim(t *testing.T, addr string, h http.Header) (early []int, resp *http.Response, appGot http.Header) {
	t.Helper()
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { early = append(early, code); return nil },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/p/sw.js", nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&appGot); err != nil {
		t.Fatal(err)
	}
	return early, resp, appGot
}

// TestServeOnAPreviewHost: an app on a preview host it may share with
// others keeps its cookies to its own prefix and that host, and can
// neither install a service worker over the host nor wipe its storage;
// no interim answer passes; the app learns nothing of the viewer's
// address, whatever the viewer claims.
func TestServeOnAPreviewHost(t *testing.T) {
	addr := proxyTo(t, previewHostApp(t), testMeter(t, wide), false)
	early, resp, appGot := interim(t, addr, http.Header{"X-Real-Ip": {"6.6.6.6"}, "X-Forwarded-For": {"6.6.6.6"},
		"True-Client-Ip": {"6.6.6.6"}})
	if len(early) > 0 {
		t.Errorf("interim answers %v passed (their headers are not filtered)", early)
	}
	got := resp.Header.Values("Set-Cookie")
	want := []string{"tossed=1; Path=/p/; HttpOnly", "mine=2; Path=/p/"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Set-Cookie %q, want %q", got, want)
	}
	for _, h := range []string{"Service-Worker-Allowed", "Clear-Site-Data"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s: %s reached the preview host", h, v)
		}
	}
	for _, h := range []string{"X-Real-Ip", "X-Forwarded-For", "True-Client-Ip"} {
		if v := appGot.Get(h); v != "" {
			t.Errorf("the app got %s: %s", h, v)
		}
	}
	if appGot.Get("X-Forwarded-Host") != addr || appGot.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("the app lost the host it was asked as: %v", appGot)
	}
}

// TestServeSandboxedAsksNoPassword: on the API's origin the app cannot
// raise a password prompt in the API's name, nor pass an interim answer.
func TestServeSandboxedAsksNoPassword(t *testing.T) {
	addr := proxyTo(t, previewHostApp(t), testMeter(t, wide), true)
	early, resp, _ := interim(t, addr, nil)
	if len(early) > 0 {
		t.Errorf("interim answers %v passed", early)
	}
	for _, h := range []string{"Www-Authenticate", "Set-Cookie", "Service-Worker-Allowed", "Clear-Site-Data"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s: %s on the API's origin", h, v)
		}
	}
}

// TestMeterKeyConns: one key's previews together hold KeyConns
// connections by its key and as many through its URLs, whatever the
// ports; another key's are its own.
func TestMeterKeyConns(t *testing.T) {
	m := testMeter(t, Limits{Conns: 2, KeyConns: 3, Bytes: 1, Idle: time.Second})
	var releases []func()
	for port := range 3 {
		r, err := m.Acquire(Target{Session: "ses_a", Owner: "alice", Port: 80 + port}, true)
		if err != nil {
			t.Fatalf("URL connection to port %d: %v", 80+port, err)
		}
		releases = append(releases, r)
	}
	if _, err := m.Acquire(Target{Session: "ses_b", Owner: "alice", Port: 90}, true); !errors.Is(err, ErrTooManyConns) ||
		!strings.Contains(err.Error(), "--preview-max-key-conns") {
		t.Errorf("a fourth URL connection of the key: %v", err)
	}
	if _, err := m.Acquire(Target{Session: "ses_b", Owner: "alice", Port: 90}, false); err != nil {
		t.Errorf("the owner's key, with its URLs' taken: %v", err)
	}
	if _, err := m.Acquire(Target{Session: "ses_c", Owner: "bob", Port: 80}, true); err != nil {
		t.Errorf("another key: %v", err)
	}
	releases[0]()
	if _, err := m.Acquire(Target{Session: "ses_b", Owner: "alice", Port: 90}, true); err != nil {
		t.Errorf("after a release: %v", err)
	}
}

// TestServeTellsTheViewersScheme: the app is told the scheme another
// node says the viewer used (Forward.Scheme), else its own connection's;
// a scheme that is neither http nor https is not passed on.
func TestServeTellsTheViewersScheme(t *testing.T) {
	appAddr := app(t)
	m := testMeter(t, wide)
	for _, tt := range []struct{ scheme, want string }{{"https", "https"}, {"http", "http"}, {"", "http"}, {"gopher", "http"}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := net.Dial("tcp", appAddr.String())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			Serve(w, r, Forward{Conn: m.Wrap(c), Prefix: "/p/", Scheme: tt.scheme,
				OnError: func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusBadGateway) }})
		}))
		resp, err := http.Get(srv.URL + "/p/echo/")
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Header http.Header }
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Header.Get("X-Forwarded-Proto"); p != tt.want {
			t.Errorf("Scheme %q: the app was told X-Forwarded-Proto %q, want %q", tt.scheme, p, tt.want)
		}
	}
}
