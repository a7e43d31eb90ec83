package pyenv

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestIndexProxy: the proxy tunnels to and fetches from the index host
// only; every other target or method gets 403.
func TestIndexProxy(t *testing.T) {
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "index page") }))
	defer index.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "leaked") }))
	defer other.Close()
	ih, oh := strings.TrimPrefix(index.URL, "http://"), strings.TrimPrefix(other.URL, "http://")
	p := &indexProxy{allowed: indexHosts([]string{index.URL + "/simple/"}), log: slog.New(slog.DiscardHandler), transport: &http.Transport{}}
	defer p.transport.CloseIdleConnections()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.serve(ctx, l) }()
	defer func() { cancel(); l.Close(); wg.Wait() }()

	for _, tc := range []struct {
		name, request string
		status        int
		body          string
	}{
		{"GET of the index", "GET " + index.URL + "/simple/ HTTP/1.1\r\nHost: " + ih + "\r\n\r\n", 200, "index page"},
		{"GET elsewhere", "GET " + other.URL + "/ HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", 403, "refused"},
		{"POST to the index", "POST " + index.URL + "/ HTTP/1.1\r\nHost: " + ih + "\r\nContent-Length: 0\r\n\r\n", 403, "refused"},
		{"origin-form request", "GET / HTTP/1.1\r\nHost: " + ih + "\r\n\r\n", 403, "refused"},
		{"CONNECT to the index", "CONNECT " + ih + " HTTP/1.1\r\nHost: " + ih + "\r\n\r\nGET /simple/ HTTP/1.1\r\nHost: " + ih + "\r\n\r\n", 200, "index page"},
		{"CONNECT elsewhere", "CONNECT " + oh + " HTTP/1.1\r\nHost: " + oh + "\r\n\r\n", 403, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.request); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.request, "CONNECT") && resp.StatusCode == 200 {
				resp, err = http.ReadResponse(br, nil) // the tunnelled response
				if err != nil {
					t.Fatal(err)
				}
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if strings.Contains(string(body), "leaked") {
				t.Errorf("the other host answered: %q", body)
			}
		})
	}
}
