package egress

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// counted counts the writes to a connection.
type counted struct {
	net.Conn
	writes int
}

func (c *counted) Write(p []byte) (int, error) {
	c.writes++
	return c.Conn.Write(p)
}

// relayHTTP sends what the payload sends on a connection to
// allowed.test:80 (allowed by its name only) through inspect and
// forwardHTTP as a relay does, and returns what reached the destination
// with the refusal reason and the number of writes it took.
func relayHTTP(t *testing.T, sent string) (string, string, int) {
	t.Helper()
	e := New(Config{}, Grant{}, Hooks{})
	defer e.Close()
	r := &relay{e: e}
	payload, down := net.Pipe()
	pipe, dest := net.Pipe()
	up := &counted{Conn: pipe}
	go func() {
		_, _ = io.WriteString(payload, sent)
		payload.Close()
	}()
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(dest)
		got <- string(b)
	}()
	_ = down.SetDeadline(time.Now().Add(5 * time.Second))
	tg := target{host: "allowed.test", name: "allowed.test", port: 80}
	op := inspect(down, tg.name)
	reason := op.reason
	switch {
	case reason != "":
	case op.kind == streamHTTP:
		reason = r.forwardHTTP(up, down, op, tg)
	case op.kind == streamOther:
		reason = ReasonUnrecognised
	default:
		t.Fatalf("inspect took %q for stream %d", sent, op.kind)
	}
	up.Close()
	down.Close()
	return <-got, reason, up.writes
}

// TestForwardHTTP: every request on a plain-HTTP connection must name the
// destination connected to and parse strictly; nothing of a refused
// request reaches the destination.
func TestForwardHTTP(t *testing.T) {
	ok1 := "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
	hidden := "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	post := "POST /u HTTP/1.1\r\nHost: allowed.test:80\r\nContent-Length: " + strconv.Itoa(len(hidden)) + "\r\n\r\n" + hidden
	chunked := "POST /u HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	evil := "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	// smuggled is evil as the content of a chunk, then the last chunk.
	smuggled := strconv.FormatInt(int64(len(evil)), 16) + "\r\n" + evil + "\r\n0\r\n\r\n"
	tests := []struct {
		name, sent, forwarded, reason string
	}{
		{"one request", ok1, ok1, ""},
		{"two requests to the destination", ok1 + ok1, ok1 + ok1, ""},
		{"a body that looks like a request", post + ok1, post + ok1, ""},
		{"a chunked body", chunked + ok1, chunked + ok1, ""},
		{"absolute form naming the destination", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", ""},
		{"another Host", evil, "", ReasonHostMismatch},
		{"the Host with another port", "GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", "", ReasonHostMismatch},
		{"the Host with a trailing dot", "GET / HTTP/1.1\r\nHost: allowed.test.\r\n\r\n", "", ReasonHostMismatch},
		{"another Host after a bare LF", "GET / HTTP/1.1\r\nX: a\nHost: evil.test\r\n\r\n", "", ReasonBadHTTPRequest},
		{"absolute form naming another server", "GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "", ReasonHostMismatch},
		{"no Host", "GET / HTTP/1.0\r\n\r\n", "", ReasonHostMismatch},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n", "", ReasonBadHTTPRequest},
		{"leading blank line", "\r\n" + evil, "", ReasonUnrecognised},
		{"leading space", " " + evil, "", ReasonUnrecognised},
		{"a tab between method and target", "GET\t/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", "", ReasonUnrecognised},
		{"a tab in a later request line", ok1 + "GET\t/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", ok1, ReasonBadHTTPRequest},
		{"a blank line between requests", ok1 + "\r\n" + evil, ok1, ReasonBadHTTPRequest},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: allowed.test\r\nX: a\r\n b\r\n\r\n", "", ReasonBadHTTPRequest},
		{"unlisted method", "PROPFIND / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "", ReasonHostMismatch},
		{"h2c prior knowledge", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", ReasonBadHTTPRequest},
		{"h2c upgrade", "GET / HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", "", ReasonBadHTTPRequest},
		{"CONNECT", "CONNECT evil.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "", ReasonBadHTTPRequest},
		{"pipelined request to another server", ok1 + evil, ok1, ReasonHostMismatch},
		{"after a chunked body, another server", chunked + evil, chunked, ReasonHostMismatch},
		{"malformed head", "GET / HTTP/1.1\r\nHost allowed.test\r\n\r\n", "", ReasonBadHTTPRequest},
		{"chunked and a length, 1.1", "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled, "", ReasonBadHTTPRequest},
		{"chunked and a length, 1.0", "POST / HTTP/1.0\r\nHost: allowed.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + evil, "", ReasonBadHTTPRequest},
		{"chunked on 1.0", "POST / HTTP/1.0\r\nHost: allowed.test\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + evil, "", ReasonBadHTTPRequest},
		{"a chunk extension", "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n5;x\r\nhello\r\n0\r\n\r\n", "", ReasonBadHTTPRequest},
		{"content on GET", "GET / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: " + strconv.Itoa(len(evil)) + "\r\n\r\n" + evil, "", ReasonBadHTTPRequest},
		{"an empty length on GET", "GET / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 0\r\n\r\n", "GET / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 0\r\n\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forwarded, reason, _ := relayHTTP(t, tt.sent)
			if reason != tt.reason || forwarded != tt.forwarded {
				t.Errorf("got %q forwarded %q, want %q forwarded %q", reason, forwarded, tt.reason, tt.forwarded)
			}
		})
	}
}

// TestForwardHTTPWrites: a chunked body of a thousand one-byte chunks,
// sent at once, reaches the destination in a few writes, not three for
// each chunk (each a segment to the destination, with its cost to the
// server's CPU), and unchanged.
func TestForwardHTTPWrites(t *testing.T) {
	head := "POST /u HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n"
	sent := head + strings.Repeat("1\r\nx\r\n", 1000) + "0\r\n\r\n" + head + "0\r\n\r\n"
	forwarded, reason, writes := relayHTTP(t, sent)
	if reason != "" || forwarded != sent {
		t.Fatalf("refused %q, %d of %d bytes forwarded", reason, len(forwarded), len(sent))
	}
	if writes > 10 {
		t.Errorf("%d writes to the destination for %d bytes", writes, len(sent))
	}
}
