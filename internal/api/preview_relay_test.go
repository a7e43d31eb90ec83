package api

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/preview"
)

// relayToken is a preview URL's token whose issuer the fake fleets name.
const relayToken = "mfrggzdfmztwq2lknnwg23tpobyxe43uov3ho6dzpiyteni2"

// rawGet GETs path on ts as the bytes come: no Accept-Encoding added, no
// answer inflated.
func rawGet(t *testing.T, ts *httptest.Server, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
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

// TestPreviewRelayKeepsTheBytes: the relay asks for no encoding the
// viewer did not, and passes a gzip answer on as the holder sent it
// (Content-Encoding and Content-Length kept, not inflated): the bytes the
// holder counted against --preview-max-bytes are the bytes sent.
func TestPreviewRelayKeepsTheBytes(t *testing.T) {
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 8<<20))
	_ = zw.Close()
	var mu sync.Mutex
	var told []string
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		told = append(told, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(zipped.Len()))
		_, _ = w.Write(zipped.Bytes())
	}))
	t.Cleanup(holder.Close)
	tag, _ := preview.Issuer(relayToken)
	node := relayNode(t, fakeFleet{holder: holder.URL, sharedTag: tag}, "")

	for _, path := range []string{"/api/v1/sessions/ses_there/ports/8000/", "/preview/" + relayToken + "/"} {
		for _, ae := range []string{"", "br"} {
			hdr := map[string]string{"X-API-Key": keyA}
			if ae != "" {
				hdr["Accept-Encoding"] = ae
			}
			resp, body := rawGet(t, node, path, hdr)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" ||
				resp.ContentLength != int64(zipped.Len()) || !bytes.Equal(body, zipped.Bytes()) {
				t.Errorf("%s (Accept-Encoding %q): %d, headers %v, %d bytes; want the holder's %d gzip bytes untouched",
					path, ae, resp.StatusCode, resp.Header, len(body), zipped.Len())
			}
			mu.Lock()
			got := told[len(told)-1]
			mu.Unlock()
			if got != ae {
				t.Errorf("%s: the viewer sent Accept-Encoding %q, the holder got %q", path, ae, got)
			}
		}
	}
}

// rawRequest sends the request line and headers req as they are to addr
// and reads the answer's status.
func rawRequest(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPreviewRelayRefusesOddRequests: CONNECT and TRACE (no browser's app
// sends them) are 405, and a path with a dot segment after the preview's
// prefix, escaped or not, 400, on both routes; none reaches the holder.
// An escaped slash that hides no dot segment is the app's path.
func TestPreviewRelayRefusesOddRequests(t *testing.T) {
	holder, requests := startHolder(t)
	tag, _ := preview.Issuer(relayToken)
	node := relayNode(t, fakeFleet{holder: holder.URL, sharedTag: tag}, "")
	addr := node.Listener.Addr().String()
	owner := "/api/v1/sessions/ses_there/ports/8000/"
	shared := "/preview/" + relayToken + "/"
	for _, tt := range []struct {
		req  string
		want int
	}{
		{"CONNECT " + owner + "../../../../v1/nodes HTTP/1.1", http.StatusMethodNotAllowed},
		{"CONNECT " + shared + "x HTTP/1.1", http.StatusMethodNotAllowed},
		{"TRACE " + owner + " HTTP/1.1", http.StatusMethodNotAllowed},
		{"TRACE " + shared + " HTTP/1.1", http.StatusMethodNotAllowed},
		{"GET " + owner + "..%2F..%2F..%2Fv1%2Fnodes HTTP/1.1", http.StatusBadRequest},
		{"GET " + owner + "%2e%2e/x HTTP/1.1", http.StatusBadRequest},
		{"GET " + shared + "a/%2E/b HTTP/1.1", http.StatusBadRequest},
		{"GET " + shared + "a%2F..%2Fb HTTP/1.1", http.StatusBadRequest},
		{"POST " + shared + "%2e HTTP/1.1", http.StatusBadRequest},
	} {
		if got := rawRequest(t, addr, tt.req+"\r\nHost: x\r\nX-API-Key: "+keyA+"\r\nContent-Length: 0\r\n\r\n"); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.req, got, tt.want)
		}
	}
	if got := requests(); len(got) != 0 {
		t.Errorf("the holder got %+v, want nothing", got)
	}
	for _, path := range []string{owner + "a%2Fb/..x/.y", shared + "a%2Fb/"} {
		if code, _, body := get(t, node, "", path, as(keyA)); code != http.StatusOK {
			t.Errorf("%s: %d %s, want it relayed", path, code, body)
		}
	}
}

// TestPreviewRelayTellsTheScheme: the holder is told the scheme the
// viewer used at the relay (https here), to tell the app.
func TestPreviewRelayTellsTheScheme(t *testing.T) {
	holder, requests := startHolder(t)
	tag, _ := preview.Issuer(relayToken)
	node := httptest.NewTLSServer(relayAPI(t, fakeFleet{holder: holder.URL, sharedTag: tag}, ""))
	t.Cleanup(node.Close)
	c := node.Client()
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test's own server
	resp, err := c.Get(node.URL + "/preview/" + relayToken + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := requests(); resp.StatusCode != http.StatusOK || len(got) != 1 || got[0].Header.Get(relayedHeader) != "https" {
		t.Errorf("%d; the holder got %+v, want it marked relayed from https", resp.StatusCode, got)
	}
}

// TestPreviewRelayHolderHangs: a holder that takes the request and never
// answers costs the viewer a 502 once its answer's time is over (the
// idle timeout, 1 s here, and the dial's 5 s), not a request held for
// ever.
func TestPreviewRelayHolderHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // read nothing, answer nothing
		}
	}()
	tag, _ := preview.Issuer(relayToken)
	node := relayNode(t, fakeFleet{holder: "http://" + ln.Addr().String(), sharedTag: tag}, "")
	start := time.Now()
	for _, path := range []string{"/api/v1/sessions/ses_there/ports/8000/", "/preview/" + relayToken + "/"} {
		code, _, body := get(t, node, "", path, as(keyA))
		if code != http.StatusBadGateway || !strings.Contains(string(body), "cannot reach the node holding this session") {
			t.Errorf("%s to a hanging holder: %d %s, want 502", path, code, body)
		}
		if path[1] == 'p' && strings.Contains(string(body), ln.Addr().String()) {
			t.Errorf("a preview URL's viewer was told the holder's address: %s", body)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("two requests to a hanging holder took %s", took)
	}
}
