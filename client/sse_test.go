package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []sseMessage
	}{
		{
			name:   "one event",
			stream: "id: 1\nevent: stdout\ndata: {\"a\":1}\n\n",
			want:   []sseMessage{{id: "1", event: "stdout", data: `{"a":1}`}},
		},
		{
			name:   "multi-line data joined with LF",
			stream: "data: {\"seq\":1,\ndata: \"data\":\"x\"}\n\n",
			want:   []sseMessage{{data: "{\"seq\":1,\n\"data\":\"x\"}"}},
		},
		{
			name:   "comments and heartbeats are skipped",
			stream: ": ping\n\n:keepalive\nid: 2\n: mid-event comment\ndata: x\n\n",
			want:   []sseMessage{{id: "2", data: "x"}},
		},
		{
			name:   "CRLF and CR line endings",
			stream: "id: 1\r\ndata: a\r\n\r\nid: 2\rdata: b\r\r",
			want:   []sseMessage{{id: "1", data: "a"}, {id: "2", data: "b"}},
		},
		{
			name:   "no space after colon, empty data line, byte order mark",
			stream: "\uFEFFdata:x\ndata\n\n",
			want:   []sseMessage{{data: "x\n"}},
		},
		{
			name:   "event without data is dropped, fields reset",
			stream: "event: status\nid: 9\n\ndata: y\n\n",
			want:   []sseMessage{{data: "y"}},
		},
		{
			name:   "unterminated last event is dropped",
			stream: "data: a\n\ndata: b\n",
			want:   []sseMessage{{data: "a"}},
		},
		{
			name:   "unknown fields and retry are ignored",
			stream: "retry: 100\nfoo: bar\ndata: z\n\n",
			want:   []sseMessage{{data: "z"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tt.stream))
			var got []sseMessage
			for {
				m, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSSEReaderCRAcrossReads(t *testing.T) {
	// A CR at the end of one read followed by LF at the start of the next
	// is one line break, not two.
	r := newSSEReader(io.MultiReader(strings.NewReader("data: a\r"), strings.NewReader("\ndata: b\r\n\r\n")))
	m, err := r.next()
	if err != nil || m.data != "a\nb" {
		t.Fatalf("got %+v, %v; want data a\\nb", m, err)
	}
}

// sseEvent renders one event the way the server does.
func sseEvent(seq int, typ, data string) string {
	return fmt.Sprintf("id: %d\nevent: %s\ndata: {\"seq\":%d,\"type\":%q,\"data\":%q,\"time\":\"2026-01-02T03:04:05Z\"}\n\n", seq, typ, seq, typ, data)
}

func TestFollow(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		body    string
		want    []Event
		wantErr func(error) bool
	}{
		{
			name:   "stream to the final status",
			status: 200,
			body: sseEvent(1, "status", "running") + ": heartbeat\n\n" + sseEvent(2, "stdout", "hello\n") +
				sseEvent(3, "stderr", "oops\n") + sseEvent(4, "status", "completed") + sseEvent(5, "stdout", "never read"),
			want: []Event{
				{1, EventStatus, "running", ts}, {2, EventStdout, "hello\n", ts},
				{3, EventStderr, "oops\n", ts}, {4, EventStatus, "completed", ts},
			},
		},
		{
			name:    "stream ends early",
			status:  200,
			body:    sseEvent(1, "status", "running"),
			want:    []Event{{1, EventStatus, "running", ts}},
			wantErr: func(err error) bool { return errors.Is(err, ErrStreamEnded) },
		},
		{
			name:   "payload without seq or type takes them from the SSE fields",
			status: 200,
			body:   "id: 7\nevent: status\ndata: {\"data\":\"killed\"}\n\n",
			want:   []Event{{Seq: 7, Type: EventStatus, Data: "killed"}},
		},
		{
			name:    "bad payload",
			status:  200,
			body:    "data: not json\n\n",
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "decoding event") },
		},
		{
			name:   "unknown execution",
			status: 404,
			body:   `{"error":"execution not found"}`,
			wantErr: func(err error) bool {
				var ae *APIError
				return errors.As(err, &ae) && ae.StatusCode == 404 && ae.Message == "execution not found"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPath, gotAccept string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotAccept = r.URL.Path, r.Header.Get("Accept")
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			var got []Event
			var gotErr error
			for ev, err := range New(srv.URL).Follow(context.Background(), "exe_1") {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, ev)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events:\n got %+v\nwant %+v", got, tt.want)
			}
			if tt.wantErr == nil && gotErr != nil {
				t.Errorf("unexpected error %v", gotErr)
			}
			if tt.wantErr != nil && !tt.wantErr(gotErr) {
				t.Errorf("err = %v, not the expected error", gotErr)
			}
			if gotPath != "/api/v1/executions/exe_1/events" || gotAccept != "text/event-stream" {
				t.Errorf("request = %s (Accept %q)", gotPath, gotAccept)
			}
		})
	}
}

func TestFollowIsLiveAndUnboundedByWithTimeout(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, sseEvent(1, "stdout", "first\n"))
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, sseEvent(2, "status", "completed"))
	}))
	defer srv.Close()
	c := New(srv.URL, WithTimeout(10*time.Millisecond))
	var got []string
	for ev, err := range c.Follow(context.Background(), "exe_1") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Data)
		if ev.Seq == 1 {
			// The first event arrived while the server still holds the
			// stream open; let it wait past the client's call timeout.
			time.Sleep(30 * time.Millisecond)
			close(next)
		}
	}
	if !reflect.DeepEqual(got, []string{"first\n", "completed"}) {
		t.Errorf("got %q", got)
	}
}

func TestFollowStopsWhenTheContextEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, sseEvent(1, "status", "running"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gotErr error
	for ev, err := range New(srv.URL).Follow(ctx, "exe_1") {
		if err != nil {
			gotErr = err
			break
		}
		if ev.Seq == 1 {
			cancel()
		}
	}
	if !errors.Is(gotErr, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", gotErr)
	}
}
