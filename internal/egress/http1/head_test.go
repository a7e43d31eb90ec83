package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestScanRequestLine(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		fail bool
	}{
		{in: "GET / HTTP/1.1\r\nHost", n: 16},
		{in: "PRI * HTTP/2.0\r\n", n: 16},
		{in: "GE"},
		{in: "GET /a?b=c HTTP/1."},
		{in: "GET /a HTTP/1.1\r"},
		{in: " GET / HTTP/1.1\r\n", fail: true},
		{in: "\r\nGET / HTTP/1.1\r\n", fail: true},
		{in: "GET\t/ HTTP/1.1\r\n", fail: true},
		{in: "GET  / HTTP/1.1\r\n", fail: true},
		{in: "GET /\tHTTP/1.1\r\n", fail: true},
		{in: "GET / HTTP/1.1 \r\n", fail: true},
		{in: "GET / HTTP/1.1\n", fail: true},
		{in: "GET /\x85 HTTP/1.1\r\n", fail: true},
		{in: "GET /\x0b HTTP/1.1\r\n", fail: true},
		{in: "GET / http/1.1\r\n", fail: true},
		{in: "GET / HTTP/1.10\r\n", fail: true},
		{in: "\x15\x03\x01\x00\x02", fail: true},
		{in: "PING\r\n", fail: true},
	}
	for _, tt := range tests {
		n, err := ScanRequestLine([]byte(tt.in))
		if (err != nil) != tt.fail || n != tt.n {
			t.Errorf("ScanRequestLine(%q) = %d, %v; want %d, fail %v", tt.in, n, err, tt.n, tt.fail)
		}
	}
	if _, err := ScanRequestLine([]byte("GET /" + strings.Repeat("a", MaxHead))); !errors.Is(err, ErrTooLong) {
		t.Errorf("a request line longer than MaxHead: %v", err)
	}
}

func TestParseHead(t *testing.T) {
	tests := []struct {
		name      string
		head      string
		err       error
		host      string
		authority string
		framing   Framing
		length    int64
	}{
		{name: "origin form", head: "GET /x?y HTTP/1.1\r\nHost: ok.test\r\nAccept: */*\r\n\r\n", host: "ok.test"},
		{name: "host with port, no space", head: "GET / HTTP/1.1\r\nhost:ok.test:8080\r\n\r\n", host: "ok.test:8080"},
		{name: "host in brackets", head: "GET / HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n", host: "[2001:db8::1]:443"},
		{name: "absolute form", head: "GET HTTP://ok.test:80?q HTTP/1.1\r\nHost: ok.test\r\n\r\n", host: "ok.test", authority: "ok.test:80"},
		{name: "asterisk form", head: "OPTIONS * HTTP/1.1\r\nHost: ok.test\r\n\r\n", host: "ok.test"},
		{name: "HTTP/1.0 without Host", head: "GET / HTTP/1.0\r\n\r\n"},
		{name: "content length", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0012\r\n\r\n", host: "a", framing: Length, length: 12},
		{name: "chunked", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", host: "a", framing: Chunked},
		{name: "tab inside a value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\tc \r\n\r\n", host: "a"},
		{name: "HTTP/2", head: "PRI * HTTP/2.0\r\n\r\n", err: ErrVersion},
		{name: "HTTP/1.2", head: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", err: ErrVersion},
		{name: "leading space", head: " GET / HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrRequestLine},
		{name: "bare LF", head: "GET / HTTP/1.1\r\nX: a\nHost: b\r\n\r\n", err: ErrLine},
		{name: "bare CR", head: "GET / HTTP/1.1\r\nX: a\rHost: b\r\n\r\n", err: ErrLine},
		{name: "obs-fold", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n", err: ErrField},
		{name: "space before colon", head: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", err: ErrField},
		{name: "vertical tab in a value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\x0bHost: c\r\n\r\n", err: ErrField},
		{name: "NEL in a value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: b\x85Host: c\r\n\r\n", err: ErrField},
		{name: "NUL in a value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: \x00\r\n\r\n", err: ErrField},
		{name: "no Host on 1.1", head: "GET / HTTP/1.1\r\n\r\n", err: ErrHost},
		{name: "two Hosts", head: "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", err: ErrHost},
		{name: "Host with a space after it", head: "GET / HTTP/1.1\r\nHost: a \r\n\r\n", err: ErrHost},
		{name: "Host with userinfo", head: "GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", err: ErrHost},
		{name: "Host with two names", head: "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", err: ErrHost},
		{name: "empty Host", head: "GET / HTTP/1.1\r\nHost:\r\n\r\n", err: ErrHost},
		{name: "Host with an empty port", head: "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", err: ErrHost},
		{name: "absolute form with userinfo", head: "GET http://a@b/ HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrTarget},
		{name: "absolute form with a fragment", head: "GET http://a#@b/ HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrTarget},
		{name: "another scheme", head: "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrTarget},
		{name: "authority form", head: "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrTarget},
		{name: "asterisk with GET", head: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrTarget},
		{name: "both framings", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrFraming},
		{name: "chunked on 1.0", head: "POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrFraming},
		{name: "two lengths", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", err: ErrFraming},
		{name: "a list of lengths", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", err: ErrFraming},
		{name: "signed length", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n", err: ErrFraming},
		{name: "gzip coding", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", err: ErrFraming},
		{name: "underscore framing", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n", err: ErrField},
		{name: "bytes after the head", head: "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET", err: ErrLine},
		{name: "no empty line", head: "GET / HTTP/1.1\r\nHost: a\r\n", err: ErrLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHead([]byte(tt.head))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if h.Host != tt.host || h.Authority != tt.authority || h.Framing != tt.framing || h.Length != tt.length {
				t.Errorf("got host %q authority %q framing %d length %d", h.Host, h.Authority, h.Framing, h.Length)
			}
		})
	}
}

// TestReadStream: heads and contents are found where a server finds
// them, and what CopyBody passes on is the content as sent (chunk sizes
// written again in canonical form).
func TestReadStream(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		hosts  []string
		body   string // every content passed on, one after another
		err    error
	}{
		{name: "pipelined", stream: "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n", hosts: []string{"a", "b"}},
		{name: "a content that looks like a request", stream: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 27\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\nGET / HTTP/1.1\r\nHost: c\r\n\r\n",
			hosts: []string{"a", "c"}, body: "GET / HTTP/1.1\r\nHost: b\r\n\r\n"},
		{name: "chunks with sizes canonical", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n005\r\nhello\r\nA\r\n0123456789\r\n000\r\n\r\nGET / HTTP/1.1\r\nHost: c\r\n\r\n",
			hosts: []string{"a", "c"}, body: "5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n"},
		{name: "a chunk extension", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\n\r\n",
			hosts: []string{"a"}, err: ErrChunk},
		{name: "a trailer", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n\r\n",
			hosts: []string{"a"}, body: "0\r\n", err: ErrChunk},
		{name: "data longer than its size", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
			hosts: []string{"a"}, body: "2\r\nhe", err: ErrChunk},
		{name: "a size line ended by a bare LF", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
			hosts: []string{"a"}, err: ErrChunk},
		{name: "a huge chunk size", stream: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
			hosts: []string{"a"}, err: ErrChunk},
		{name: "content cut short", stream: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
			hosts: []string{"a"}, body: "abc", err: io.ErrUnexpectedEOF},
		{name: "head cut short", stream: "GET / HTTP/1.1\r\nHost: a\r\n", err: io.ErrUnexpectedEOF},
		{name: "a leading empty line", stream: "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", err: ErrRequestLine},
		{name: "not a request at all", stream: "SSH-2.0-OpenSSH\r\n", err: ErrRequestLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.stream), 16)
			var hosts []string
			var body bytes.Buffer
			var err error
			for {
				var h *Head
				if _, h, err = ReadHead(br); err != nil {
					break
				}
				hosts = append(hosts, h.Host)
				if err = CopyBody(&body, br, h); err != nil {
					break
				}
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if !errors.Is(err, tt.err) || strings.Join(hosts, ",") != strings.Join(tt.hosts, ",") || body.String() != tt.body {
				t.Errorf("hosts %q body %q error %v; want %q %q %v", hosts, body.String(), err, tt.hosts, tt.body, tt.err)
			}
		})
	}
}
