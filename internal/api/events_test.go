package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
)

func TestEvents(t *testing.T) {
	path := "/api/v1/executions/" + idCompleted + "/events"
	tests := []struct {
		name     string
		path     string
		header   map[string]string
		wantCode int
		wantCT   string
	}{
		{"sse replay", path, nil, 200, "text/event-stream"},
		{"sse resume with Last-Event-ID", path, map[string]string{"Last-Event-ID": "2"}, 200, "text/event-stream"},
		{"sse resume with after", path + "?after=3", nil, 200, "text/event-stream"},
		{"ndjson replay", path, map[string]string{"Accept": "application/x-ndjson"}, 200, "application/x-ndjson"},
		{"ndjson resume", path + "?after=1", map[string]string{"Accept": "application/x-ndjson"}, 200, "application/x-ndjson"},
		{"sse install progress", "/api/v1/executions/" + idInstall + "/events", nil, 200, "text/event-stream"},
	}
	ts := newTestServer(t, newFakeEngine(), nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, tt.path, "", nil, tt.header)
			if code != tt.wantCode || hdr.Get("Content-Type") != tt.wantCT {
				t.Fatalf("status %d Content-Type %q, want %d %q: %s", code, hdr.Get("Content-Type"), tt.wantCode, tt.wantCT, body)
			}
			compareGolden(t, goldenName(t)+".txt", body)
		})
	}

	errs := []struct {
		name     string
		path     string
		header   map[string]string
		wantCode int
	}{
		{"unknown execution", "/api/v1/executions/exe_nope/events", nil, 404},
		{"bad Last-Event-ID", path, map[string]string{"Last-Event-ID": "abc"}, 400},
		{"bad after", path + "?after=-1", nil, 400},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := call(t, ts, http.MethodGet, tt.path, "", nil, tt.header)
			if code != tt.wantCode {
				t.Errorf("status = %d, want %d: %s", code, tt.wantCode, body)
			}
			checkGolden(t, goldenName(t), code, hdr, body)
		})
	}
}

// TestEventsHeartbeatAndDisconnect follows an execution that produces no
// more events: the stream must carry heartbeat comments, and end when the
// client goes away.
func TestEventsHeartbeatAndDisconnect(t *testing.T) {
	ts := newTestServer(t, newFakeEngine(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/executions/"+idLive+"/events", nil)
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == ": heartbeat" && len(lines) > 4 {
			break
		}
	}
	want := []string{"id: 1", "event: status", `data: {"seq":1,"type":"status","data":"running","time":"2025-01-02T03:04:01.123456Z"}`, ""}
	if len(lines) < 5 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") || lines[len(lines)-1] != ": heartbeat" {
		t.Fatalf("stream = %q, want the first event then a heartbeat", lines)
	}
}

// TestEventsFollowerCaps opens event streams of a running execution up to
// the caps: one more is refused with 429 and Retry-After, per execution and
// per API key, and a closed stream frees its place.
func TestEventsFollowerCaps(t *testing.T) {
	tests := []struct {
		name         string
		perExecution int
		perKey       int
		second       string // the id the second stream follows
		wantMessage  string
	}{
		{"per execution", 1, 10, idLive, "too many followers of this execution (at most 1 at once); retry later"},
		{"per key", 10, 1, idCompleted, "too many event streams open for this API key (at most 1 at once); retry later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, newFakeEngine(), func(c *config.Config) {
				c.Followers.PerExecution, c.Followers.PerKey = tt.perExecution, tt.perKey
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			first := openStream(t, ctx, ts, idLive)

			code, hdr, body := call(t, ts, http.MethodGet, "/api/v1/executions/"+tt.second+"/events", "", nil, nil)
			if code != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" {
				t.Fatalf("second stream: %d Retry-After %q %s, want 429 with Retry-After 1", code, hdr.Get("Retry-After"), body)
			}
			if got := decode[Error](t, body).Message; got != tt.wantMessage {
				t.Errorf("message %q, want %q", got, tt.wantMessage)
			}
			if code, _, _ := call(t, ts, http.MethodGet, "/api/v1/executions/exe_nope/events", "", nil, nil); code != http.StatusNotFound {
				t.Errorf("unknown execution at the cap: %d, want 404", code)
			}

			first.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				code, _, body = call(t, ts, http.MethodGet, "/api/v1/executions/"+idCompleted+"/events", "", nil, nil)
				if code == http.StatusOK || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if code != http.StatusOK {
				t.Errorf("after the first stream closed: %d %s, want 200", code, body)
			}
		})
	}
}

// openStream opens the event stream of id and reads its first line, so
// that the server counts it.
func openStream(t *testing.T, ctx context.Context, ts *httptest.Server, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/v1/executions/"+id+"/events", nil)
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("stream of %s: %d", id, res.StatusCode)
	}
	if _, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}
