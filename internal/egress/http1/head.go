package http1

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// MaxHead bounds a request head: its request line, its fields and the
// empty line that ends it.
const MaxHead = 64 << 10

// Errors of ParseHead, ReadHead and CopyBody. Every one means the request
// is refused; they differ only to say why.
var (
	ErrRequestLine = errors.New("http1: malformed request line")
	ErrVersion     = errors.New("http1: not HTTP/1.0 or HTTP/1.1")
	ErrLine        = errors.New("http1: line not ended by CRLF")
	ErrField       = errors.New("http1: malformed header field")
	ErrHost        = errors.New("http1: missing, repeated or malformed Host")
	ErrTarget      = errors.New("http1: malformed request target")
	ErrFraming     = errors.New("http1: ambiguous or unsupported framing")
	ErrTooLong     = errors.New("http1: request head too long")
	ErrChunk       = errors.New("http1: malformed chunked content")
)

// Framing is how a request's content is delimited.
type Framing int

// Framings of a Head.
const (
	NoContent Framing = iota // no Content-Length, no Transfer-Encoding
	Length                   // Content-Length: Head.Length bytes
	Chunked                  // Transfer-Encoding: chunked
)

// Field is one header field as sent: its name (any case) and its value
// without the whitespace around it.
type Field struct {
	Name, Value string
}

// Head is one request head.
type Head struct {
	Method string
	Target string
	Minor  int     // HTTP/1.Minor: 0 or 1
	Fields []Field // in the order sent
	// Host is the value of the Host field ("" only on HTTP/1.0 without
	// one).
	Host string
	// Authority is the host[:port] of an absolute-form target
	// ("http://host/..."), "" for an origin-form ("/...") or asterisk-form
	// ("*") one. A server takes it over Host.
	Authority string
	Framing   Framing
	Length    int64 // the Content-Length when Framing is Length
}

// Has reports whether the head has a field called name (any case).
func (h *Head) Has(name string) bool {
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, name) {
			return true
		}
	}
	return false
}

// ScanRequestLine looks for a request line (method SP target SP
// HTTP/d.d CRLF) at the start of b. It returns the line's length with its
// CRLF once b holds it whole; 0 and no error while b is a prefix of one;
// an error as soon as b cannot begin one.
func ScanRequestLine(b []byte) (int, error) {
	i := 0
	for i < len(b) && isTchar(b[i]) {
		i++
	}
	switch {
	case i == len(b):
		return more(b)
	case i == 0 || b[i] != ' ':
		return 0, ErrRequestLine
	}
	j := i + 1
	for j < len(b) && isVchar(b[j]) {
		j++
	}
	switch {
	case j == len(b):
		return more(b)
	case j == i+1 || b[j] != ' ':
		return 0, ErrRequestLine
	}
	const version = "HTTP/d.d\r\n"
	for k := range version {
		p := j + 1 + k
		if p == len(b) {
			return more(b)
		}
		if c := b[p]; version[k] == 'd' && !isDigit(c) || version[k] != 'd' && c != version[k] {
			return 0, ErrRequestLine
		}
	}
	return j + 1 + len(version), nil
}

// more is ScanRequestLine's answer for a valid prefix.
func more(b []byte) (int, error) {
	if len(b) >= MaxHead {
		return 0, ErrTooLong
	}
	return 0, nil
}

// ParseHead parses a whole request head: raw runs from the request line
// to the empty line that ends the head, both included, and no further.
func ParseHead(raw []byte) (*Head, error) {
	if len(raw) > MaxHead {
		return nil, ErrTooLong
	}
	n, err := ScanRequestLine(raw)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ErrRequestLine
	}
	line := string(raw[:n-2])
	sp1, sp2 := strings.IndexByte(line, ' '), strings.LastIndexByte(line, ' ')
	h := &Head{Method: line[:sp1], Target: line[sp1+1 : sp2]}
	switch line[sp2+1:] {
	case "HTTP/1.1":
		h.Minor = 1
	case "HTTP/1.0":
	default:
		return nil, ErrVersion
	}
	hosts := 0
	for rest := raw[n:]; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 1 || rest[i-1] != '\r' || bytes.IndexByte(rest[:i-1], '\r') >= 0 {
			return nil, ErrLine
		}
		l := rest[:i-1]
		rest = rest[i+1:]
		if len(l) == 0 {
			if len(rest) != 0 {
				return nil, ErrLine
			}
			break
		}
		f, trailingSpace, err := parseFieldBytes(l, false)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(f.Name, "host") {
			// Some servers keep the spaces after a value: "host " would
			// not be the host the egress compared.
			if hosts++; hosts > 1 || trailingSpace || !validHost(f.Value) {
				return nil, ErrHost
			}
			h.Host = f.Value
		}
		h.Fields = append(h.Fields, f)
	}
	if hosts == 0 && h.Minor == 1 {
		return nil, ErrHost
	}
	if err := h.parseTarget(); err != nil {
		return nil, err
	}
	if err := h.parseFraming(); err != nil {
		return nil, err
	}
	return h, nil
}

// parseFieldBytes parses a field line (without its CRLF). A line starting
// with whitespace (obs-fold) has no name and is refused; a value holds
// visible ASCII, spaces and tabs, and with obsText bytes above 0x7f too.
func parseFieldBytes(l []byte, obsText bool) (f Field, trailingSpace bool, err error) {
	i := 0
	for i < len(l) && isTchar(l[i]) {
		i++
	}
	if i == 0 || i == len(l) || l[i] != ':' {
		return Field{}, false, ErrField
	}
	v := l[i+1:]
	for _, c := range v {
		if !isVchar(c) && c != ' ' && c != '\t' && !(obsText && c >= 0x80) {
			return Field{}, false, ErrField
		}
	}
	name := string(l[:i])
	// A name that only a server normalising '_' to '-' would read as a
	// framing field is refused rather than guessed about.
	if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); n != strings.ToLower(name) &&
		(n == "content-length" || n == "transfer-encoding") {
		return Field{}, false, ErrField
	}
	trimmed := bytes.Trim(v, " \t")
	trailingSpace = len(trimmed) > 0 && len(bytes.TrimRight(v, " \t")) != len(v)
	return Field{Name: name, Value: string(trimmed)}, trailingSpace, nil
}

// parseTarget checks the request target's form and takes the authority
// of an absolute-form one.
func (h *Head) parseTarget() error {
	t := h.Target
	switch {
	case strings.IndexByte(t, '#') >= 0:
		return ErrTarget
	case t[0] == '/':
		return nil
	case t == "*":
		if h.Method != "OPTIONS" {
			return ErrTarget
		}
		return nil
	}
	scheme, rest, ok := strings.Cut(t, "://")
	if !ok || !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return ErrTarget
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	if !validHost(rest[:end]) {
		return ErrTarget
	}
	h.Authority = rest[:end]
	return nil
}

// parseFraming reads Content-Length and Transfer-Encoding. Both at once,
// either twice, a list, a coding other than chunked, and
// Transfer-Encoding on HTTP/1.0 (which some servers honour and others
// ignore) are refused.
func (h *Head) parseFraming() error {
	var te, cl []string
	for _, f := range h.Fields {
		switch {
		case strings.EqualFold(f.Name, "transfer-encoding"):
			te = append(te, f.Value)
		case strings.EqualFold(f.Name, "content-length"):
			cl = append(cl, f.Value)
		}
	}
	switch {
	case len(te) > 0:
		if h.Minor == 0 || len(cl) > 0 || len(te) > 1 || !strings.EqualFold(te[0], "chunked") {
			return ErrFraming
		}
		h.Framing = Chunked
	case len(cl) > 0:
		v := cl[0]
		if len(cl) > 1 || v == "" || len(v) > 18 || strings.TrimLeft(v, "0123456789") != "" {
			return ErrFraming
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ErrFraming
		}
		h.Framing, h.Length = Length, n
	}
	return nil
}

// validHost accepts host[:port] where host is a name of letters, digits,
// '-', '.' and '_', or an IP literal in brackets, and port is 1-5 digits.
func validHost(s string) bool {
	host, port := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		host, port = s[:i], s[i+1:]
		if port == "" || len(port) > 5 || strings.TrimLeft(port, "0123456789") != "" {
			return false
		}
	}
	if host == "" {
		return false
	}
	if host[0] == '[' {
		inner, ok := strings.CutSuffix(host[1:], "]")
		return ok && inner != "" && strings.Trim(inner, "0123456789abcdefABCDEF:.") == ""
	}
	for i := range len(host) {
		c := host[i]
		if !isAlnum(c) && c != '-' && c != '.' && c != '_' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isVchar reports whether c is visible ASCII (RFC 5234 VCHAR).
func isVchar(c byte) bool { return 0x21 <= c && c <= 0x7e }

// isTchar reports whether c may appear in a token (RFC 9110 tchar): a
// method or a field name.
func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
