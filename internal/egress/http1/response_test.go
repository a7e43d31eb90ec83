package http1

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestChunkedContent: a response's chunked content is read as a lenient
// client reads it (extensions, whitespace and bare LF after a size), its
// chunks' sizes told as they begin, and what a client could take for
// other framing is refused.
func TestChunkedContent(t *testing.T) {
	tests := []struct {
		name, content, data string
		sizes               []int64
		err                 error
	}{
		{"chunks", "5\r\nhello\r\n1\r\n \r\nB\r\nworld, then\r\n0\r\n\r\nnext", "hello world, then", []int64{5, 1, 11}, nil},
		{"extensions and whitespace", "5;a=b \r\nhello\r\n6 \t\r\n world\r\n0;x\r\nTrailer: t\r\n\r\n", "hello world", []int64{5, 6}, nil},
		{"bare LF after a size", "5\nhello\r\n0\n\r\n", "hello", []int64{5}, nil},
		{"no CRLF after data", "5\r\nhelloX\r\n0\r\n\r\n", "hello", []int64{5}, ErrChunk},
		{"not hex", "5g\r\nhello\r\n", "", nil, ErrChunk},
		{"no digits", ";x\r\nhello\r\n", "", nil, ErrChunk},
		{"sixteen digits", "0000000000000005\r\nhello\r\n", "", nil, ErrChunk},
		{"ends in data", "5\r\nhel", "hel", []int64{5}, io.ErrUnexpectedEOF},
		{"ends in the trailer", "0\r\nTrailer: t\r\n", "", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.content))
			var sizes []int64
			h := &Response{Framing: Chunked}
			got, err := io.ReadAll(h.ContentReader(r, func(n int64) { sizes = append(sizes, n) }))
			if string(got) != tt.data || !errors.Is(err, tt.err) && !(err == nil && tt.err == nil) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tt.data, tt.err)
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Errorf("sizes %v, want %v", sizes, tt.sizes)
			}
			if tt.err == nil {
				if rest, _ := io.ReadAll(r); tt.name == "chunks" && string(rest) != "next" {
					t.Errorf("what follows the content: %q", rest)
				}
			}
		})
	}
}
