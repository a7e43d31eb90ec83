package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
)

// UntilClose is the framing of a response whose content runs until the
// connection ends (RFC 9112 §6.3, last rule).
const UntilClose Framing = 3

// ErrStatusLine and ErrResponse refuse a response head.
var (
	ErrStatusLine = errors.New("http1: malformed status line")
	ErrResponse   = errors.New("http1: malformed response head")
)

// Response is one response head.
type Response struct {
	Minor   int // HTTP/1.Minor
	Status  int
	Fields  []Field
	Framing Framing
	Length  int64 // the Content-Length when Framing is Length
	// Close says that the connection ends after this response: it said
	// Connection: close, it is HTTP/1.0, or its content runs until the
	// end.
	Close bool
}

// Get returns the value of the first field called name (any case), ""
// when there is none.
func (r *Response) Get(name string) string {
	for _, f := range r.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// ReadResponse reads one response head from r, the answer to a request of
// method: raw is the head exactly as sent. Lines must end with CRLF, field
// lines are read as request fields are (ParseHead), except that values
// may also hold bytes above 0x7f (obs-text: some servers send UTF-8 in
// Content-Disposition); a Transfer-Encoding other than one "chunked", or
// with a Content-Length, is refused. At the end of the stream before the
// head's first byte it returns io.EOF.
func ReadResponse(r *bufio.Reader, method string) (raw []byte, h *Response, err error) {
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
		if bytes.HasSuffix(raw, []byte("\r\n\r\n")) {
			break
		}
	}
	h, err = parseResponse(raw, method)
	if err != nil {
		return nil, nil, err
	}
	return raw, h, nil
}

// parseResponse parses a whole response head.
func parseResponse(raw []byte, method string) (*Response, error) {
	lines := bytes.Split(raw[:len(raw)-4], []byte("\r\n"))
	h := &Response{}
	if err := h.statusLine(lines[0]); err != nil {
		return nil, err
	}
	for _, l := range lines[1:] {
		if bytes.IndexByte(l, '\r') >= 0 || bytes.IndexByte(l, '\n') >= 0 {
			return nil, ErrLine
		}
		f, _, err := parseFieldBytes(l, true)
		if err != nil {
			return nil, err
		}
		h.Fields = append(h.Fields, f)
	}
	if err := h.framing(method); err != nil {
		return nil, err
	}
	return h, nil
}

// statusLine parses "HTTP/1.x NNN reason" (the reason may be empty, its
// space too, as lenient clients accept).
func (h *Response) statusLine(l []byte) error {
	s := string(l)
	switch {
	case strings.HasPrefix(s, "HTTP/1.1 "):
		h.Minor = 1
	case strings.HasPrefix(s, "HTTP/1.0 "):
	default:
		return ErrStatusLine
	}
	s = s[len("HTTP/1.x "):]
	if len(s) < 3 || len(s) > 3 && s[3] != ' ' {
		return ErrStatusLine
	}
	code, err := strconv.Atoi(s[:3])
	if err != nil || code < 100 || s[0] == '+' || s[0] == '-' {
		return ErrStatusLine
	}
	for _, c := range []byte(s[min(len(s), 4):]) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return ErrStatusLine
		}
	}
	h.Status = code
	return nil
}

// framing decides how the content is delimited (RFC 9112 §6.3) and
// whether the connection ends after it.
func (h *Response) framing(method string) error {
	var te, cl []string
	for _, f := range h.Fields {
		switch {
		case strings.EqualFold(f.Name, "transfer-encoding"):
			te = append(te, f.Value)
		case strings.EqualFold(f.Name, "content-length"):
			cl = append(cl, f.Value)
		case strings.EqualFold(f.Name, "connection"):
			for _, tok := range strings.Split(f.Value, ",") {
				if strings.EqualFold(strings.TrimSpace(tok), "close") {
					h.Close = true
				}
			}
		}
	}
	if h.Minor == 0 {
		h.Close = true
	}
	switch {
	case len(te) > 0 && (len(cl) > 0 || len(te) > 1 || !strings.EqualFold(te[0], "chunked")):
		return ErrFraming
	case len(cl) > 1:
		return ErrFraming
	case len(cl) == 1:
		v := cl[0]
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || v == "" || strings.TrimLeft(v, "0123456789") != "" {
			return ErrFraming
		}
		h.Length = n
	}
	switch {
	case method == "HEAD" || h.Status < 200 || h.Status == 204 || h.Status == 304:
		h.Framing = NoContent
	case len(te) > 0:
		h.Framing = Chunked
	case len(cl) == 1:
		h.Framing = Length
	default:
		h.Framing, h.Close = UntilClose, true
	}
	return nil
}

// ContentReader returns a reader of the response's content from r: its
// data only (chunks decoded, trailer fields read and dropped), ending
// where the content ends. For chunked content, begin (when not nil) is
// told each chunk's size before its data is read.
func (h *Response) ContentReader(r *bufio.Reader, begin func(size int64)) io.Reader {
	switch h.Framing {
	case Length:
		return &exact{r: io.LimitReader(r, h.Length), left: h.Length}
	case Chunked:
		return &chunked{r: r, begin: begin}
	case UntilClose:
		return r
	}
	return bytes.NewReader(nil)
}

// exact reads a Content-Length's bytes, and fails if the stream ends
// first.
type exact struct {
	r    io.Reader
	left int64
}

func (e *exact) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// chunked reads chunked content a chunk at a time, then its trailer
// section.
type chunked struct {
	r       *bufio.Reader
	begin   func(size int64)
	left    int64 // of the chunk being read
	started bool  // a chunk was read: its CRLF comes before the next size
	err     error // sticky; io.EOF after the trailer section
}

func (c *chunked) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if err != nil {
		c.err = unexpected(err)
	}
	return n, c.err
}

// next reads what comes between two chunks' data: the CRLF after the
// last one, the next one's size line, and after the last chunk the
// trailer section (io.EOF then).
func (c *chunked) next() error {
	if c.started {
		crlf, err := c.r.Peek(2)
		if err != nil {
			return unexpected(err)
		}
		if string(crlf) != "\r\n" {
			return ErrChunk
		}
		_, _ = c.r.Discard(2)
	}
	size, err := responseChunkSize(c.r)
	if err != nil {
		return err
	}
	if size == 0 {
		if err := skipTrailers(c.r); err != nil {
			return err
		}
		return io.EOF
	}
	c.started, c.left = true, size
	if c.begin != nil {
		c.begin(size)
	}
	return nil
}

// maxResponseChunkLine bounds a response's chunk-size line, extensions
// included.
const maxResponseChunkLine = 4096

// responseChunkSize reads a response's chunk-size line as a lenient
// client does: 1-15 hex digits, then optional whitespace and extensions
// (dropped), then CRLF or LF.
func responseChunkSize(r *bufio.Reader) (int64, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxResponseChunkLine:
		return 0, ErrChunk
	case err != nil:
		return 0, unexpected(err)
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 || len(line) > maxChunkLine-2 {
		return 0, ErrChunk
	}
	var size int64
	for _, c := range line {
		d, ok := hexValue(c)
		if !ok {
			return 0, ErrChunk
		}
		size = size<<4 | int64(d)
	}
	return size, nil
}

// skipTrailers reads the trailer fields after the last chunk, up to the
// empty line that ends them.
func skipTrailers(r *bufio.Reader) error {
	read := 0
	for {
		line, err := r.ReadSlice('\n')
		read += len(line)
		if err != nil {
			return unexpected(err)
		}
		if read > MaxHead || !bytes.HasSuffix(line, []byte("\r\n")) {
			return ErrChunk
		}
		if len(line) == 2 {
			return nil
		}
	}
}
