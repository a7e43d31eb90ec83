package http1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ReadHead reads one request head from r, line by line, and parses it.
// raw is the head exactly as sent. A line not ended by CRLF, a first line
// that cannot be a request line and a head over MaxHead are refused as
// soon as they are seen. At the end of the stream before the head's first
// byte it returns io.EOF, after it io.ErrUnexpectedEOF.
func ReadHead(r *bufio.Reader) (raw []byte, h *Head, err error) {
	start := 0 // where the line being read starts in raw
	for {
		part, err := r.ReadSlice('\n')
		raw = append(raw, part...)
		if len(raw) > MaxHead {
			return nil, nil, ErrTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(raw) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		line := raw[start:]
		if len(line) < 2 || line[len(line)-2] != '\r' {
			return nil, nil, ErrLine
		}
		if start == 0 {
			if n, err := ScanRequestLine(line); err != nil || n != len(line) {
				return nil, nil, ErrRequestLine
			}
		} else if len(line) == 2 {
			break
		}
		start = len(raw)
	}
	h, err = ParseHead(raw)
	if err != nil {
		return nil, nil, err
	}
	return raw, h, nil
}

// maxChunkLine bounds a chunk-size line: 15 hex digits (the size stays
// below 2^60) and CRLF.
const maxChunkLine = 17

// CopyBody copies the content of the request h heads from r to w as
// sent, chunk framing included (chunk-size lines in canonical form), and
// stops where the content ends: what r holds after it is the next
// request. Chunked content is checked
// as it passes: a chunk-size line of anything but 1-15 hex digits (no
// extensions), chunk data not followed by CRLF, and trailer fields are
// refused with ErrChunk. A stream that ends early is io.ErrUnexpectedEOF;
// an error of w is returned as it is.
func CopyBody(w io.Writer, r *bufio.Reader, h *Head) error {
	return CopyBodySeen(w, io.Discard, r, h)
}

// CopyBodySeen is CopyBody that also writes the content's data alone
// (without chunk framing) to seen, before w: an error of seen stops the
// copy, and the data it refused never reaches w.
func CopyBodySeen(w, seen io.Writer, r *bufio.Reader, h *Head) error {
	data := io.MultiWriter(seen, w)
	switch h.Framing {
	case Length:
		return copyN(data, r, h.Length)
	case Chunked:
		for {
			size, err := chunkSize(w, r)
			if err != nil {
				return err
			}
			if err := copyN(data, r, size); err != nil {
				return err
			}
			// After data, its CRLF; after the last chunk, the CRLF that
			// ends the (empty) trailer section.
			crlf, err := r.Peek(2)
			if err != nil {
				return unexpected(err)
			}
			if string(crlf) != "\r\n" {
				return ErrChunk
			}
			if err := copyN(w, r, 2); err != nil {
				return err
			}
			if size == 0 {
				return nil
			}
		}
	}
	return nil
}

// chunkSize reads one chunk-size line and forwards it in canonical form
// (lower-case hex without leading zeros): a parser that caps or cuts the
// digits it reads cannot take the size for another.
func chunkSize(w io.Writer, r *bufio.Reader) (int64, error) {
	var size int64
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err != nil {
			return 0, unexpected(err)
		}
		if c == '\r' && i > 0 {
			lf, err := r.ReadByte()
			if err != nil {
				return 0, unexpected(err)
			}
			if lf != '\n' {
				return 0, ErrChunk
			}
			if _, err := fmt.Fprintf(w, "%x\r\n", size); err != nil {
				return 0, err
			}
			return size, nil
		}
		d, ok := hexValue(c)
		if !ok || i == maxChunkLine-2 {
			return 0, ErrChunk
		}
		size = size<<4 | int64(d)
	}
}

func hexValue(c byte) (byte, bool) {
	switch {
	case isDigit(c):
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// copyN copies n bytes of r to w.
func copyN(w io.Writer, r *bufio.Reader, n int64) error {
	_, err := io.CopyN(w, r, n)
	return unexpected(err)
}

// unexpected turns the end of the stream into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
