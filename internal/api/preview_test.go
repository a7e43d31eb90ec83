package api

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/preview"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/store"
)

// testPreviewConfig turns previews on with a key of the test's own.
func testPreviewConfig(t *testing.T, ttl time.Duration) engine.PreviewConfig {
	t.Helper()
	key, err := preview.LoadKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return engine.PreviewConfig{Enabled: true, Key: key, TTL: ttl}
}

// webApp is a cell that serves, from a thread of the session, on
// 127.0.0.1:8000: /headers answers the request line and headers it got as
// JSON; /ws is a WebSocket that echoes text frames (the stdlib only).
const webApp = `
import base64, hashlib, http.server, json, struct, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            k = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(k.encode()).digest()).decode())
            self.end_headers()
            self.wfile.flush()
            while True:
                h = self.rfile.read(2)
                if len(h) < 2 or h[0] & 0x0f == 8:
                    return
                n, mask = h[1] & 0x7f, self.rfile.read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                self.wfile.write(bytes([0x81, len(b"echo:" + data)]) + b"echo:" + data)
                self.wfile.flush()
        ctype, body = "application/json", json.dumps({"path": self.path, "headers": dict(self.headers.items())}).encode()
        if self.path == "/probe":
            ctype, body = "text/html", PROBE.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
PROBE = """<!doctype html><title>probe</title><h1>preview probe</h1><pre id="out">running</pre><script>
var r = {};
try { r.storage = String(localStorage.getItem("pyexec-test-key")); } catch (e) { r.storage = "blocked: " + e.name; }
try { r.cookie = document.cookie; } catch (e) { r.cookie = "blocked: " + e.name; }
function show() { document.getElementById("out").textContent = JSON.stringify(r); }
fetch("/api/v1/sessions").then(function (x) { return x.text().then(function (t) { return x.status + " " + t; }); },
    function (e) { return "refused: " + e.name; }).then(function (s) {
  r.api = s;
  var ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/probe$/, "ws"));
  ws.onopen = function () { ws.send("browser"); };
  ws.onmessage = function (ev) { r.ws = ev.data; r.done = true; show(); };
  ws.onerror = function () { r.ws = "error"; r.done = true; show(); };
});
</script>"""
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("serving")
`

// previewStack is a real engine with previews, served three times: on
// the API's origin only (api), with a preview host (hosted) and with a
// wildcard preview host (wild).
type previewStack struct {
	api, hosted, wild *httptest.Server
	session           string
}

const previewHost = "preview.test:8443"

func startPreviewStack(t *testing.T, ttl time.Duration) previewStack {
	t.Helper()
	return startPreviewStackWith(t, ttl, 0)
}

// startPreviewStackWith is startPreviewStack with --preview-max-conns
// maxConns (the default for 0).
func startPreviewStackWith(t *testing.T, ttl time.Duration, maxConns int) previewStack {
	t.Helper()
	eng := enginetest.Start(t, engine.Config{Concurrency: 2, QueueSize: 4, DefaultTimeout: 60 * time.Second,
		Sessions: engine.SessionConfig{Max: 4, DefaultMemoryBytes: 128 << 20}, Preview: testPreviewConfig(t, ttl)},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps { return engine.Deps{Jails: jails} })
	serve := func(host string) *httptest.Server {
		c := config.Default()
		c.APIKeys = []string{"a:" + keyA, "b:" + keyB}
		c.Preview.Enabled, c.Preview.Host = true, host
		if maxConns > 0 {
			c.Preview.MaxConns = maxConns
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		s, err := New(eng, Options{Config: c, Version: "test", Isolation: "jail"})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	st := previewStack{api: serve(""), hosted: serve("http://" + previewHost), wild: serve("http://*." + previewHost)}
	code, _, body := call(t, st.api, http.MethodPost, "/api/v1/sessions", "application/json", []byte(`{}`), as(keyA))
	if code != http.StatusCreated {
		t.Fatalf("a's session: %d %s", code, body)
	}
	st.session = decode[SessionInfo](t, body).SessionID
	cell, _ := json.Marshal(map[string]string{"code": webApp})
	code, _, body = call(t, st.api, http.MethodPost, "/api/v1/sessions/"+st.session+"/execute", "application/json", cell, as(keyA))
	if code != http.StatusOK || !strings.Contains(string(body), "serving") {
		t.Fatalf("starting the app: %d %s", code, body)
	}
	return st
}

// appSaw decodes what the app echoed of a request.
func appSaw(t *testing.T, body []byte) (path string, headers map[string]string) {
	t.Helper()
	var got struct {
		Path    string            `json:"path"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("not the app's answer: %s", body)
	}
	return got.Path, got.Headers
}

// get sends a GET to url (on ts's listener) with hdr, Host host if set.
func get(t *testing.T, ts *httptest.Server, host, path string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// TestPreview: a session's stdlib web app is reached through the proxy
// by its owner's key, never by another key, and through a shared preview
// URL without a key until that URL is revoked; the app never sees the
// viewer's key; WebSocket works; wrong ports are 400, a closed one 502.
func TestPreview(t *testing.T) {
	st := startPreviewStack(t, time.Hour)
	ports := "/api/v1/sessions/" + st.session + "/ports/"
	viewer := map[string]string{"X-API-Key": keyA, "Authorization": "Bearer " + keyA, "Cookie": "pyexec_key=" + keyA + "; app=1"}

	t.Run("owner", func(t *testing.T) {
		_, _, before := call(t, st.api, http.MethodGet, "/api/v1/sessions/"+st.session, "", nil, as(keyA))
		time.Sleep(10 * time.Millisecond)
		code, hdr, body := get(t, st.api, "", ports+"8000/headers?x=1", viewer)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		path, headers := appSaw(t, body)
		if path != "/headers?x=1" || headers["Cookie"] != "app=1" || strings.Contains(string(body), keyA) {
			t.Errorf("the app saw %s", body)
		}
		if !strings.HasPrefix(hdr.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("served on the API's origin without the sandbox: %v", hdr)
		}
		// A preview is the session's activity: its idle timeout starts again.
		_, _, after := call(t, st.api, http.MethodGet, "/api/v1/sessions/"+st.session, "", nil, as(keyA))
		if a, b := decode[SessionInfo](t, after).LastActivity, decode[SessionInfo](t, before).LastActivity; !a.After(b.Time) {
			t.Errorf("last_activity %v after a preview, %v before", a, b)
		}
		// The mux sends the app's root to its slash, where the app's
		// relative links resolve.
		if code, hdr, _ := get(t, st.api, "", ports+"8000", as(keyA)); code != http.StatusTemporaryRedirect || hdr.Get("Location") != ports+"8000/" {
			t.Errorf("the app's root without its slash: %d %v", code, hdr)
		}
	})
	t.Run("key b", func(t *testing.T) {
		code, _, body := get(t, st.api, "", ports+"8000/headers", as(keyB))
		_, _, unknown := get(t, st.api, "", "/api/v1/sessions/ses_00000000-0000-7000-8000-000000000000/ports/8000/headers", as(keyA))
		if code != http.StatusNotFound || string(body) != string(unknown) {
			t.Errorf("key b: %d %s; want what an unknown session gets: %s", code, body, unknown)
		}
		code, _, body = call(t, st.api, http.MethodPost, ports+"8000/share", "", nil, as(keyB))
		if code != http.StatusNotFound || string(body) != string(unknown) {
			t.Errorf("key b shares: %d %s", code, body)
		}
	})
	t.Run("ports", func(t *testing.T) {
		for _, p := range []string{"02280", "+80", "%2080", "80abc", "0", "65536", "-1", "8000%20"} {
			code, _, body := get(t, st.api, "", ports+p+"/headers", as(keyA))
			if code != http.StatusBadRequest || !strings.Contains(string(body), "invalid port") {
				t.Errorf("port %q: %d %s, want 400 invalid port", p, code, body)
			}
			code, _, body = call(t, st.api, http.MethodPost, ports+p+"/share", "", nil, as(keyA))
			if code != http.StatusBadRequest || !strings.Contains(string(body), "invalid port") {
				t.Errorf("share of port %q: %d %s, want 400 invalid port", p, code, body)
			}
		}
		code, _, body := get(t, st.api, "", ports+"8001/", as(keyA))
		if code != http.StatusBadGateway || !strings.Contains(string(body), "nothing listens on this port") {
			t.Errorf("a closed port: %d %s, want 502 with the reason", code, body)
		}
	})
	t.Run("websocket", func(t *testing.T) {
		if got := wsEcho(t, st.api.Listener.Addr().String(), "", ports+"8000/ws", as(keyA), "hi"); got != "echo:hi" {
			t.Errorf("echo %q", got)
		}
	})

	t.Run("share", func(t *testing.T) {
		code, _, body := call(t, st.api, http.MethodPost, ports+"8000/share", "", nil, as(keyA))
		sh := decode[PreviewShare](t, body)
		if code != http.StatusCreated || !strings.HasPrefix(sh.URL, preview.PathPrefix) || sh.Port != 8000 || sh.Isolation != "sandbox" {
			t.Fatalf("share: %d %s", code, body)
		}
		// No key at all, and the viewer's key (sent anyway) does not reach the app.
		if code, _, body := get(t, st.api, "", sh.URL+"headers", nil); code != 200 {
			t.Fatalf("the preview URL without a key: %d %s", code, body)
		}
		code, hdr, body := get(t, st.api, "", sh.URL+"headers", viewer)
		if path, _ := appSaw(t, body); code != 200 || path != "/headers" || strings.Contains(string(body), keyA) {
			t.Errorf("through the preview URL the app saw %d %s", code, body)
		}
		if !strings.HasPrefix(hdr.Get("Content-Security-Policy"), "sandbox") {
			t.Error("a preview URL on the API's origin is served without the sandbox")
		}
		if got := wsEcho(t, st.api.Listener.Addr().String(), "", sh.URL+"ws", nil, "shared"); got != "echo:shared" {
			t.Errorf("WebSocket through the preview URL: %q", got)
		}
		// The token opens only what it was issued for: altered, it opens nothing.
		tok := strings.TrimSuffix(strings.TrimPrefix(sh.URL, preview.PathPrefix), "/")
		alt := []byte(tok)
		// Another letter of the token's alphabet, so the path needs no escape.
		if alt[len(alt)-1] == 'a' {
			alt[len(alt)-1] = 'b'
		} else {
			alt[len(alt)-1] = 'a'
		}
		if code, _, body := get(t, st.api, "", preview.PathPrefix+string(alt)+"/headers", nil); code != http.StatusForbidden {
			t.Errorf("an altered token: %d %s", code, body)
		}
		// The same token spelled with an escape is not guessed at.
		escaped := preview.PathPrefix + fmt.Sprintf("%%%02X", tok[0]) + tok[1:] + "/headers"
		if code, _, body := get(t, st.api, "", escaped, nil); code != http.StatusBadRequest {
			t.Errorf("an escaped token: %d %s", code, body)
		}
		// The preview host serves nothing of it.
		if code, _, body := get(t, st.hosted, "", sh.URL+"headers", nil); code != http.StatusNotFound {
			t.Errorf("the API origin of a server with a preview host: %d %s", code, body)
		}

		code, _, body = call(t, st.api, http.MethodDelete, ports+"8000/share", "", nil, as(keyA))
		if code != 200 || decode[PreviewRevoked](t, body).Revoked != 1 {
			t.Fatalf("revoke: %d %s", code, body)
		}
		if code, _, body := get(t, st.api, "", sh.URL+"headers", nil); code != http.StatusForbidden || !strings.Contains(string(body), "revoked") {
			t.Errorf("a revoked URL: %d %s", code, body)
		}
	})

	t.Run("preview host", func(t *testing.T) {
		code, _, body := call(t, st.hosted, http.MethodPost, ports+"8000/share", "", nil, as(keyA))
		sh := decode[PreviewShare](t, body)
		if code != http.StatusCreated || !strings.HasPrefix(sh.URL, "http://"+previewHost+preview.PathPrefix) || sh.Isolation != "preview_host" {
			t.Fatalf("share: %d %s", code, body)
		}
		path := strings.TrimPrefix(sh.URL, "http://"+previewHost)
		code, hdr, body := get(t, st.hosted, previewHost, path+"headers", viewer)
		if p, headers := appSaw(t, body); code != 200 || p != "/headers" || headers["Host"] != previewHost || strings.Contains(string(body), keyA) {
			t.Errorf("on the preview host the app saw %d %s", code, body)
		}
		if hdr.Get("Content-Security-Policy") != "" {
			t.Errorf("the app's own origin needs no sandbox: %v", hdr)
		}
		if code, hdr, _ := get(t, st.hosted, previewHost, strings.TrimSuffix(path, "/"), nil); code != http.StatusTemporaryRedirect || hdr.Get("Location") != path {
			t.Errorf("the preview's root without its slash: %d %v", code, hdr)
		}
		if got := wsEcho(t, st.hosted.Listener.Addr().String(), previewHost, path+"ws", nil, "hosted"); got != "echo:hosted" {
			t.Errorf("WebSocket on the preview host: %q", got)
		}
		// The API is not served on the preview host, even with a key.
		if code, _, body := get(t, st.hosted, previewHost, "/api/v1/sessions", as(keyA)); code != http.StatusNotFound {
			t.Errorf("the API on the preview host: %d %s", code, body)
		}
	})

	t.Run("wildcard preview host", func(t *testing.T) {
		code, _, body := call(t, st.wild, http.MethodPost, ports+"8000/share", "", nil, as(keyA))
		sh := decode[PreviewShare](t, body)
		if code != http.StatusCreated || sh.Isolation != "per_preview" {
			t.Fatalf("share: %d %s", code, body)
		}
		// The host name carries a label that opens nothing; the token
		// stays in the path, out of DNS, TLS's SNI and Origin headers.
		host, path, ok := strings.Cut(strings.TrimPrefix(sh.URL, "http://"), "/")
		path = "/" + path
		label, suffix, _ := strings.Cut(host, ".")
		token := strings.TrimSuffix(strings.TrimPrefix(path, preview.PathPrefix), "/")
		if !ok || suffix != previewHost || !strings.HasPrefix(path, preview.PathPrefix) || strings.Contains(host, token) || strings.Contains(token, label) {
			t.Fatalf("URL %s: want http://<label>.%s/preview/<token>/", sh.URL, previewHost)
		}
		code, _, body = get(t, st.wild, strings.ToUpper(host), path+"headers", nil)
		if p, _ := appSaw(t, body); code != 200 || p != "/headers" {
			t.Errorf("on its own origin the app saw %d %s", code, body)
		}
		if code, _, body := get(t, st.wild, "x"+host, path+"headers", nil); code != http.StatusForbidden {
			t.Errorf("the token on another label: %d %s", code, body)
		}
		if code, _, body := get(t, st.wild, host, "/headers", nil); code != http.StatusNotFound {
			t.Errorf("the label without the token: %d %s", code, body)
		}
		if code, _, body := get(t, st.wild, previewHost, path+"headers", nil); code != http.StatusNotFound {
			t.Errorf("the bare preview host: %d %s", code, body)
		}
	})
}

// TestPreviewURLExpires: a preview URL works until its TTL, then 403,
// and what it opened is closed then.
func TestPreviewURLExpires(t *testing.T) {
	st := startPreviewStack(t, 3*time.Second)
	code, _, body := call(t, st.api, http.MethodPost, "/api/v1/sessions/"+st.session+"/ports/8000/share", "", nil, as(keyA))
	sh := decode[PreviewShare](t, body)
	if code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	if code, _, body := get(t, st.api, "", sh.URL+"headers", nil); code != 200 {
		t.Fatalf("a fresh URL: %d %s", code, body)
	}
	w := wsOpen(t, st.api.Listener.Addr().String(), "", sh.URL+"ws", nil)
	time.Sleep(time.Until(sh.ExpiresAt.Time) + 100*time.Millisecond)
	if code, _, body := get(t, st.api, "", sh.URL+"headers", nil); code != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("an expired URL: %d %s, want 403 expired", code, body)
	}
	if !closedWithin(w, 2*time.Second) {
		t.Error("a WebSocket opened through the URL outlived it")
	}
}

// TestPreviewOff: without --preview every preview route says so (501).
func TestPreviewOff(t *testing.T) {
	ts := newTestServer(t, struct {
		*fakeEngine
		SessionEngine
	}{fakeEngine: newFakeEngine()}, nil)
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/sessions/ses_x/ports/8000/"},
		{http.MethodPost, "/api/v1/sessions/ses_x/ports/8000/share"},
		{http.MethodDelete, "/api/v1/sessions/ses_x/ports/8000/share"},
		{http.MethodGet, "/preview/abc/"},
	} {
		code, _, body := call(t, ts, r.method, r.path, "", nil, nil)
		if code != http.StatusNotImplemented || !strings.Contains(string(body), "--preview") {
			t.Errorf("%s %s: %d %s, want 501 naming --preview", r.method, r.path, code, body)
		}
	}
	// Nor is the MCP tool offered, to function calling or in /health.
	if code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools", "", nil, nil); code != http.StatusOK ||
		strings.Contains(string(body), "preview_session_port") || !strings.Contains(string(body), "run_python") {
		t.Errorf("GET /api/v1/tools without --preview: %d %s", code, body)
	}
	if code, _, body := call(t, ts, http.MethodGet, "/health", "", nil, nil); code != http.StatusOK || !strings.Contains(string(body), `"previews":false`) {
		t.Errorf("/health without --preview: %d %s", code, body)
	}
}

// wsEcho opens a WebSocket at path on addr, sends msg in a masked text
// frame and returns the text of the frame that comes back.
func wsEcho(t *testing.T, addr, host, path string, hdr map[string]string, msg string) string {
	t.Helper()
	ws := wsOpen(t, addr, host, path, hdr)
	defer ws.Close()
	got, err := ws.say(msg)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// ws is an open WebSocket.
type ws struct {
	net.Conn
	br *bufio.Reader
}

// wsOpen opens a WebSocket at path on addr (Host host, addr if empty).
func wsOpen(t *testing.T, addr, host, path string, hdr map[string]string) ws {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if host == "" {
		host = addr
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	key := base64.StdEncoding.EncodeToString(nonce)
	var req bytes.Buffer
	req.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + "\r\n")
	for k, v := range hdr {
		req.WriteString(k + ": " + v + "\r\n")
	}
	req.WriteString("\r\n")
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	return ws{Conn: c, br: br}
}

// say sends msg in a masked text frame and returns the text of the frame
// that comes back.
func (w ws) say(msg string) (string, error) {
	mask := []byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(msg))}
	frame = append(frame, mask...)
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	if _, err := w.Write(frame); err != nil {
		return "", err
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(w.br, head); err != nil {
		return "", err
	}
	payload := make([]byte, head[1]&0x7f)
	if _, err := io.ReadFull(w.br, payload); err != nil {
		return "", err
	}
	return string(payload), nil
}
