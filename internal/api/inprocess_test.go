package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestInProcess(t *testing.T) {
	t.Run("status, headers, body and the caller reach the client", func(t *testing.T) {
		rt := &inProcess{caller: callerInfo{Name: "ci", Addr: "10.0.0.1"}, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Caller", callerFrom(r.Context()).Name)
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		})}
		hc := &http.Client{Transport: rt}
		resp, err := hc.Post("http://x/a?b=c", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Caller") != "ci" || string(got) != "POST /a?b=c hello" {
			t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, got)
		}
	})

	t.Run("a handler that writes nothing answers 200", func(t *testing.T) {
		rt := &inProcess{handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
		resp, err := (&http.Client{Transport: rt}).Get("http://x/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})

	t.Run("a stream arrives as it is written and closing it ends the handler", func(t *testing.T) {
		ended := make(chan struct{})
		rt := &inProcess{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(ended)
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // a stream that never ends by itself
		})}
		resp, err := (&http.Client{Transport: rt}).Get("http://x/events")
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		resp.Body.Close()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("the handler outlived the response body")
		}
	})

	t.Run("a canceled request returns the cancellation", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		rt := &inProcess{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release })}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
		if _, err := rt.RoundTrip(req); err == nil {
			t.Fatal("no error")
		}
	})
}
