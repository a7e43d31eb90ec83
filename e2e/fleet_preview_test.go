package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// previewApp is a cell that serves, from a thread of the session, on
// 127.0.0.1:8000: a page at / (its path, and which of the headers it
// must never see it got), a WebSocket at /ws that echoes text frames,
// and at /gz 16 MiB of zeros gzipped (some 16 KiB), whatever the viewer
// accepts, with the Accept-Encoding it got in X-Told-Accept-Encoding
// (the standard library only).
const previewApp = `
import base64, gzip, hashlib, http.server, threading
GZ = gzip.compress(b"\0" * (16 << 20), 9)
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
        if self.path == "/gz":
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(GZ)))
            self.send_header("X-Told-Accept-Encoding", self.headers.get("Accept-Encoding", ""))
            self.end_headers()
            self.wfile.write(GZ)
            return
        told = [h for h in ("Pyexec-Preview-Relayed", "X-Forwarded-For", "X-Api-Key") if h in self.headers]
        body = ("<h1>app of the session</h1><p>%s</p><p>told: %s</p>" % (self.path, ",".join(told))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("serving")
`

// TestFleetPreview: a session on node a serves a web app; through node b
// its owner's key gets the page and a WebSocket echo, a preview URL
// shared through b opens it without a key (WebSocket too) until it is
// revoked through b (403), made-up tokens are 403 at once (no fleet-wide question), key b gets what an unknown session gets (404),
// a port nobody listens on is 502; once a is killed, the preview through
// b answers 410 node_lost like the session's other routes.
func TestFleetPreview(t *testing.T) {
	needRoot(t)
	const keyA, keyB = "preview-key-a-0123456789", "preview-key-b-0123456789"
	fleet := startFleet(t, startNATSCluster(t, 1), 2, "--nats-replicas", "1", "--preview", "--preview-max-bytes", "1048576",
		"--api-keys", "a:"+keyA+",b:"+keyB)
	ctx := context.Background()
	a := client.New(fleet[0].url, client.WithAPIKey(keyA))
	b := client.New(fleet[1].url, client.WithAPIKey(keyA)) // key a, through node b
	s, err := a.CreateSession(ctx, &client.SessionRequest{Requirements: "-"})
	if err != nil {
		t.Fatalf("create via a: %v", err)
	}
	res, err := a.ExecuteCell(ctx, s.SessionID, &client.CellRequest{Code: previewApp})
	if err != nil || !strings.Contains(res.Stdout, "serving") {
		t.Fatalf("starting the app: %+v, %v", res, err)
	}
	if n := liveSessions(t, fleet[0].url, keyA); n != 1 {
		t.Fatalf("node a holds %d sessions, want the one (created there)", n)
	}
	bAddr := strings.TrimPrefix(fleet[1].url, "http://")
	ports := "/api/v1/sessions/" + s.SessionID + "/ports/"

	code, body := fetch(t, fleet[1].url+ports+"8000/hello?x=1", keyA)
	if code != http.StatusOK || !strings.Contains(body, "<h1>app of the session</h1><p>/hello?x=1</p><p>told: </p>") {
		t.Fatalf("the owner's key through b: %d %s", code, body)
	}
	if got := wsSay(t, bAddr, ports+"8000/ws", keyA, "via b"); got != "echo:via b" {
		t.Errorf("the owner's WebSocket through b echoed %q", got)
	}
	code, body = fetch(t, fleet[1].url+ports+"8000/", keyB)
	unknownCode, unknown := fetch(t, fleet[1].url+"/api/v1/sessions/ses_00000000-0000-7000-8000-000000000000/ports/8000/", keyB)
	if code != http.StatusNotFound || unknownCode != http.StatusNotFound || body != unknown {
		t.Errorf("key b through b: %d %s; want what an unknown session gets: %d %s", code, body, unknownCode, unknown)
	}
	code, body = fetch(t, fleet[1].url+ports+"8001/", keyA)
	if code != http.StatusBadGateway || !strings.Contains(body, "nothing listens on this port") {
		t.Errorf("a closed port through b: %d %s, want 502 with the reason", code, body)
	}

	// A gzip answer passes through b as the app sent it: b adds no
	// Accept-Encoding and inflates nothing, so the 1 MiB limit a counts
	// is what b sends (it was 16 MiB, inflated at b).
	direct, directBody := fetchRaw(t, fleet[0].url+ports+"8000/gz", keyA)
	relayed, relayedBody := fetchRaw(t, fleet[1].url+ports+"8000/gz", keyA)
	for _, r := range []struct {
		at   string
		resp *http.Response
		body []byte
	}{{"a", direct, directBody}, {"b", relayed, relayedBody}} {
		if r.resp.StatusCode != http.StatusOK || r.resp.Header.Get("Content-Encoding") != "gzip" ||
			r.resp.Header.Get("X-Told-Accept-Encoding") != "" || r.resp.ContentLength != int64(len(r.body)) || len(r.body) >= 1<<20 {
			t.Errorf("the gzip answer through %s: %d, headers %v, %d bytes; want it untouched, under 1 MiB",
				r.at, r.resp.StatusCode, r.resp.Header, len(r.body))
		}
	}
	if string(directBody) != string(relayedBody) {
		t.Errorf("the gzip answer through b is %d bytes, directly %d: changed on the way", len(relayedBody), len(directBody))
	}

	// A preview URL shared through b is kept by a; b finds it there.
	sh, err := b.ShareSessionPort(ctx, s.SessionID, 8000)
	if err != nil {
		t.Fatalf("share through b: %v", err)
	}
	if !strings.HasPrefix(sh.URL, fleet[1].url+"/preview/") {
		t.Fatalf("the preview URL %q is not on b", sh.URL)
	}
	start := time.Now()
	code, body = fetch(t, sh.URL+"page", "")
	if code != http.StatusOK || !strings.Contains(body, "<p>/page</p>") {
		t.Fatalf("the preview URL through b: %d %s", code, body)
	}
	t.Logf("the preview URL's first request through b took %s", time.Since(start))
	u, err := url.Parse(sh.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := wsSay(t, bAddr, u.Path+"ws", "", "shared"); got != "echo:shared" {
		t.Errorf("the preview URL's WebSocket through b echoed %q", got)
	}
	onA := fleet[0].url + u.Path
	if code, body := fetch(t, onA, ""); code != http.StatusOK {
		t.Errorf("the preview URL on a, which keeps it: %d %s", code, body)
	}
	if n, err := b.RevokeSessionPort(ctx, s.SessionID, 8000); err != nil || n != 1 {
		t.Fatalf("revoke through b: %d, %v; want 1", n, err)
	}
	for _, at := range []string{sh.URL, onA} {
		if code, body := fetch(t, at, ""); code != http.StatusForbidden || !strings.Contains(body, "this preview URL was revoked") {
			t.Errorf("the revoked preview URL %s: %d %s, want 403 revoked", at, code, body)
		}
	}

	// Tokens no node issued: b reads the issuer in the token and asks no
	// one, so a burst of made-up ones costs no wait each (it was a NATS
	// question to the whole fleet and 1 s). One that names a, with a
	// signature a never made, is refused by a as fast.
	start = time.Now()
	const burst = 40
	forged := []byte(u.Path[len("/preview/") : len("/preview/")+48])
	for i := range burst {
		tok := fmt.Sprintf("%048d", i) // no base32 token: refused by b itself
		if i%2 == 1 {
			tok = strings.Repeat(string('a'+rune(i%26)), 48) // a token whose issuer no node is
		}
		code, body = fetch(t, fleet[1].url+"/preview/"+tok+"/", "")
		if code != http.StatusForbidden || !strings.Contains(body, "not valid on this server") {
			t.Errorf("made-up token %s through b: %d %s, want 403", tok, code, body)
		}
	}
	// a's issuer, not a's signature (the last character is the MAC's)
	forged[len(forged)-1] = map[bool]byte{true: 'b', false: 'a'}[forged[len(forged)-1] == 'a']
	code, body = fetch(t, fleet[1].url+"/preview/"+string(forged)+"/", "")
	if code != http.StatusForbidden || !strings.Contains(body, "not valid on this server") {
		t.Errorf("a's issuer with a signature a never made, through b: %d %s, want 403", code, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("%d made-up tokens through b took %s: each waits for something", burst+1, took)
	}
	t.Logf("%d made-up tokens were refused in %s", burst+1, time.Since(start))

	fleet[0].crash()
	code, body = fetch(t, fleet[1].url+ports+"8000/", keyA)
	if code != http.StatusGone || !strings.Contains(body, "node_lost") {
		t.Errorf("after a's kill -9, through b: %d %s, want 410 node_lost", code, body)
	}
}

// fetch GETs url with key (none if empty) and returns the status and body.
func fetch(t *testing.T, url, key string) (int, string) {
	t.Helper()
	resp, body := fetchRaw(t, url, key)
	return resp.StatusCode, string(body)
}

// fetchRaw GETs url with key (none if empty), without asking for or
// inflating a compressed answer: the answer and its bytes as they came.
func fetchRaw(t *testing.T, url, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// wsSay opens a WebSocket at path on addr (with key, if set), sends msg
// in a masked text frame and returns the text of the frame that comes
// back.
func wsSay(t *testing.T, addr, path, key, msg string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	wsKey := base64.StdEncoding.EncodeToString(nonce)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + wsKey + "\r\n"
	if key != "" {
		req += "X-API-Key: " + key + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(wsKey + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade at %s: %d %v %s", path, resp.StatusCode, resp.Header, b)
	}
	mask := []byte{7, 1, 9, 3}
	frame := append([]byte{0x81, 0x80 | byte(len(msg))}, mask...)
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, head[1]&0x7f)
	if _, err := io.ReadFull(br, payload); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(payload)
}
