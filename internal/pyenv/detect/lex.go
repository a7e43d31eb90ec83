package detect

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// The lexer turns the bytes of one Python file into the few tokens the scan
// reads, the way CPython's tokenizer would. Wherever the file is something
// the lexer does not read exactly as the interpreter does — a coding cookie
// other than UTF-8 over non-ASCII text, bytes that are not UTF-8, NUL
// bytes, non-ASCII outside strings and comments, a lone carriage return, a
// form feed in indentation, an unterminated string or bracket — it gives up
// with a reason, and the interpreter's own ast decides (Analyzer).

// kind is a token's kind.
type kind uint8

const (
	kEOF       kind = iota
	kLineStart      // the first token of a logical line follows; carries its indentation
	kNewline        // the end of a logical line
	kName           // an identifier or keyword
	kNumber
	kString     // a string or bytes literal that is not an f-string
	kOp         // an operator or delimiter
	kFStart     // an f-string begins
	kFEnd       // an f-string ends
	kFieldOpen  // a replacement field of an f-string begins
	kFieldClose // a replacement field of an f-string ends
)

// indent is the indentation of a line counted both ways CPython counts it:
// tabs to the next multiple of 8, and tabs as one column. The two orders
// of lines must agree, or CPython refuses the file (TabError).
type indent struct{ c8, c1 int }

type token struct {
	kind kind
	text []byte // a name, an operator, a string's body (between its quotes)
	line int
	ind  indent // kLineStart
	// strings
	bytesLit  bool // b"..."
	backslash bool // the body holds a backslash (an escape, unless raw)
}

// maxNesting bounds open brackets and f-string levels together: CPython
// refuses more than 200 nested brackets, and fewer nested f-strings.
const maxNesting = 200

// frame is an open bracket or f-string level of the lexer.
type frame struct {
	open   byte // '(', '[', '{'; 'F' an f-string's text, 'E' a replacement field, 'S' a format spec
	quote  byte // 'F', 'S': the f-string's quote
	triple bool
	raw    bool
	line   int // 'F': the line the f-string starts on
	end    int // 'F': where the f-string ends for interpreters before 3.12 (-1 unknown)
	depth  int // 'E': the lexer's bracket count when the field opened
}

type lexer struct {
	src       []byte
	pos       int
	line      int
	pep701    bool // 3.12+: f-strings are tokenized as nested code
	stack     []frame
	brackets  int  // open '(', '[' and '{' of the code (not of f-strings)
	lineStart bool // the next token starts a logical line
	inLine    bool // the current logical line has tokens
	fail      string
}

func newLexer(src []byte, pep701 bool) *lexer {
	lx := &lexer{src: src, line: 1, pep701: pep701, lineStart: true}
	lx.checkEncoding()
	return lx
}

// checkEncoding gives up on files CPython would decode otherwise than as
// UTF-8: a coding cookie naming another codec over non-ASCII bytes, bytes
// that are not UTF-8 at all, NUL bytes (an error in every version, with
// different messages).
func (lx *lexer) checkEncoding() {
	lx.src = bytes.TrimPrefix(lx.src, []byte("\xef\xbb\xbf"))
	if bytes.IndexByte(lx.src, 0) >= 0 {
		lx.fail = "a NUL byte"
		return
	}
	ascii := true
	for _, c := range lx.src {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if codec, ok := codingCookie(lx.src); ok && !isUTF8Name(codec) && (!ascii || !asciiCompatible(codec)) {
		lx.fail = "a coding cookie (" + codec + ") over non-ASCII text, or naming a codec the scan does not know"
		return
	}
	if !ascii && !utf8.Valid(lx.src) {
		lx.fail = "bytes that are not UTF-8"
	}
}

// codingCookie finds a PEP 263 declaration on the first or second line.
func codingCookie(src []byte) (string, bool) {
	for i := 0; i < 2 && len(src) > 0; i++ {
		line, rest, _ := bytes.Cut(src, []byte("\n"))
		t := bytes.TrimLeft(line, " \t\f")
		if len(t) == 0 || t[0] != '#' {
			if i == 0 && len(t) == 0 {
				src = rest
				continue
			}
			return "", false
		}
		for rest := t; ; {
			j := bytes.Index(rest, []byte("coding"))
			if j < 0 || j+6 >= len(rest) {
				break
			}
			if rest[j+6] == ':' || rest[j+6] == '=' {
				name := bytes.TrimLeft(rest[j+7:], " \t")
				k := 0
				for k < len(name) && (isIdentByte(name[k]) || name[k] == '-' || name[k] == '.') {
					k++
				}
				return string(name[:k]), true
			}
			rest = rest[j+6:]
		}
		src = rest
	}
	return "", false
}

// isUTF8Name reports whether a cookie names UTF-8, as CPython normalizes
// it ("utf-8", "UTF_8", "utf-8-unix"...).
func isUTF8Name(codec string) bool {
	c := strings.ReplaceAll(strings.ToLower(codec), "_", "-")
	return c == "utf-8" || c == "utf8" || strings.HasPrefix(c, "utf-8-")
}

// asciiCompatible reports whether a cookie names a codec that reads ASCII
// text as ASCII (a file of ASCII bytes then reads the same in it).
func asciiCompatible(codec string) bool {
	switch strings.ReplaceAll(strings.ToLower(codec), "_", "-") {
	case "latin-1", "latin1", "iso-8859-1", "iso8859-1", "iso-latin-1", "ascii", "us-ascii", "cp1252", "windows-1252":
		return true
	}
	return false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (lx *lexer) top() *frame {
	if len(lx.stack) == 0 {
		return nil
	}
	return &lx.stack[len(lx.stack)-1]
}

func (lx *lexer) push(f frame) bool {
	if len(lx.stack) >= maxNesting {
		lx.fail = "more than 200 nested brackets or f-strings"
		return false
	}
	lx.stack = append(lx.stack, f)
	return true
}

// next returns the next token; kEOF once the file is over or the lexer
// gave up (lx.fail says why).
func (lx *lexer) next() token {
	for lx.fail == "" {
		if f := lx.top(); f != nil {
			switch f.open {
			case 'F':
				return lx.fstringText(f)
			case 'S':
				if t, ok := lx.formatSpec(f); ok {
					return t
				}
				continue
			}
		}
		if lx.lineStart && len(lx.stack) == 0 {
			if t, ok := lx.startLine(); ok {
				return t
			}
			continue
		}
		if lx.pos >= len(lx.src) {
			return lx.eof()
		}
		c := lx.src[lx.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\f':
			lx.pos++
		case c == '#':
			lx.skipComment()
		case c == '\\':
			lx.continuation()
		case c == '\n' || c == '\r':
			if !lx.newline() {
				continue
			}
			if len(lx.stack) == 0 {
				lx.lineStart, lx.inLine = true, false
				return token{kind: kNewline, line: lx.line - 1}
			}
		case c >= 0x80:
			lx.fail = "non-ASCII text outside strings and comments"
		case isIdentByte(c) && !(c >= '0' && c <= '9'):
			return lx.name()
		case c >= '0' && c <= '9' || c == '.' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] >= '0' && lx.src[lx.pos+1] <= '9':
			return lx.number()
		case c == '"' || c == '\'':
			return lx.str(lx.pos, false, false)
		default:
			if t, ok := lx.op(); ok {
				return t
			}
		}
	}
	return token{kind: kEOF}
}

// newline consumes a line end ("\n" or "\r\n"); a lone "\r" is given up on.
func (lx *lexer) newline() bool {
	if lx.src[lx.pos] == '\r' {
		if lx.pos+1 >= len(lx.src) || lx.src[lx.pos+1] != '\n' {
			lx.fail = "a carriage return without a line feed"
			return false
		}
		lx.pos++
	}
	lx.pos++
	lx.line++
	return true
}

func (lx *lexer) skipComment() {
	for lx.pos < len(lx.src) && lx.src[lx.pos] != '\n' && lx.src[lx.pos] != '\r' {
		lx.pos++
	}
}

// continuation joins a line ending in a backslash to the next.
func (lx *lexer) continuation() {
	lx.pos++
	if lx.pos >= len(lx.src) || (lx.src[lx.pos] != '\n' && lx.src[lx.pos] != '\r') {
		lx.fail = "a backslash outside a string that does not end its line"
		return
	}
	if lx.newline() && lx.pos >= len(lx.src) {
		lx.fail = "a backslash continuation at the end of the file"
	}
}

// startLine measures the indentation of the next line that holds code,
// skipping blank and comment-only lines.
func (lx *lexer) startLine() (token, bool) {
	var ind indent
	for lx.pos < len(lx.src) {
		switch lx.src[lx.pos] {
		case ' ':
			ind.c8++
			ind.c1++
		case '\t':
			ind.c8 = (ind.c8/8 + 1) * 8
			ind.c1++
		case '\f':
			ind = indent{} // as CPython: a form feed resets the column
		default:
			goto measured
		}
		lx.pos++
	}
measured:
	if lx.pos >= len(lx.src) {
		lx.lineStart = false // eof follows
		return token{}, false
	}
	switch lx.src[lx.pos] {
	case '#':
		lx.skipComment()
		return token{}, false
	case '\n', '\r':
		lx.newline()
		return token{}, false
	case '\\':
		lx.fail = "a line that starts with a backslash continuation"
		return token{}, false
	}
	lx.lineStart, lx.inLine = false, true
	return token{kind: kLineStart, line: lx.line, ind: ind}, true
}

func (lx *lexer) eof() token {
	if len(lx.stack) > 0 {
		lx.fail = "a bracket or f-string that is not closed"
		return token{kind: kEOF}
	}
	if lx.inLine {
		lx.inLine, lx.lineStart = false, true
		return token{kind: kNewline, line: lx.line}
	}
	return token{kind: kEOF}
}

// name reads an identifier, or a string with a prefix (rb"...", f'...').
func (lx *lexer) name() token {
	start := lx.pos
	for lx.pos < len(lx.src) && isIdentByte(lx.src[lx.pos]) {
		lx.pos++
	}
	if lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c >= 0x80:
			lx.fail = "a non-ASCII identifier"
			return token{kind: kEOF}
		case c == '"' || c == '\'':
			if f, b, r, ok := stringPrefix(lx.src[start:lx.pos]); ok {
				if f {
					return lx.fstringStart(r)
				}
				return lx.str(lx.pos, b, r)
			}
		}
	}
	return token{kind: kName, text: lx.src[start:lx.pos], line: lx.line}
}

// stringPrefix reports whether p is a string prefix and what it says.
func stringPrefix(p []byte) (f, b, r, ok bool) {
	switch string(bytes.ToLower(p)) {
	case "r":
		return false, false, true, true
	case "u":
		return false, false, false, true
	case "b":
		return false, true, false, true
	case "br", "rb":
		return false, true, true, true
	case "f":
		return true, false, false, true
	case "fr", "rf":
		return true, false, true, true
	}
	return false, false, false, false
}

func (lx *lexer) number() token {
	start := lx.pos
	s := lx.src
	digits := func(ok func(byte) bool) {
		for lx.pos < len(s) && (ok(s[lx.pos]) || s[lx.pos] == '_') {
			lx.pos++
		}
	}
	dec := func(c byte) bool { return c >= '0' && c <= '9' }
	if s[lx.pos] == '0' && lx.pos+1 < len(s) && bytes.IndexByte([]byte("xXoObB"), s[lx.pos+1]) >= 0 {
		lx.pos += 2
		digits(func(c byte) bool { return dec(c) || c|0x20 >= 'a' && c|0x20 <= 'f' })
	} else {
		digits(dec)
		if lx.pos < len(s) && s[lx.pos] == '.' {
			lx.pos++
			digits(dec)
		}
		if lx.pos < len(s) && s[lx.pos]|0x20 == 'e' {
			p := lx.pos + 1
			if p < len(s) && (s[p] == '+' || s[p] == '-') {
				p++
			}
			if p < len(s) && dec(s[p]) {
				lx.pos = p
				digits(dec)
			}
		}
		if lx.pos < len(s) && s[lx.pos]|0x20 == 'j' {
			lx.pos++
		}
	}
	return token{kind: kNumber, text: s[start:lx.pos], line: lx.line}
}

// str reads a string literal whose opening quote is at q.
func (lx *lexer) str(q int, isBytes, raw bool) token {
	line := lx.line
	quote := lx.src[q]
	triple := q+2 < len(lx.src) && lx.src[q+1] == quote && lx.src[q+2] == quote
	open := 1
	if triple {
		open = 3
	}
	lx.pos = q + open
	body := lx.pos
	backslash := false
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == '\\':
			backslash = true
			lx.pos++
			if lx.pos < len(lx.src) && (lx.src[lx.pos] == '\n' || lx.src[lx.pos] == '\r') {
				if !lx.newline() {
					return token{kind: kEOF}
				}
				continue
			}
			lx.pos++
		case c == '\n' || c == '\r':
			if !triple {
				lx.fail = "a string that is not closed on its line"
				return token{kind: kEOF}
			}
			if !lx.newline() {
				return token{kind: kEOF}
			}
		case c == quote && (!triple || lx.pos+2 < len(lx.src) && lx.src[lx.pos+1] == quote && lx.src[lx.pos+2] == quote):
			t := token{kind: kString, text: lx.src[body:lx.pos], line: line, bytesLit: isBytes, backslash: backslash && !raw}
			lx.pos += open
			return t
		default:
			lx.pos++
		}
	}
	lx.fail = "a string that is not closed"
	return token{kind: kEOF}
}

// fstringStart opens an f-string whose quote is at lx.pos. Before
// Python 3.12 an f-string ends where any other string would; the lexer
// notes that place, and gives up if its own reading (PEP 701's, nested
// quotes allowed in replacement fields) ends elsewhere.
func (lx *lexer) fstringStart(raw bool) token {
	q := lx.pos
	quote := lx.src[q]
	triple := q+2 < len(lx.src) && lx.src[q+1] == quote && lx.src[q+2] == quote
	f := frame{open: 'F', quote: quote, triple: triple, raw: raw, line: lx.line, end: -1}
	if !lx.pep701 {
		save, saveLine := lx.pos, lx.line
		if t := lx.str(q, false, raw); t.kind == kString {
			f.end = lx.pos
		}
		lx.pos, lx.line, lx.fail = save, saveLine, ""
	}
	if triple {
		lx.pos = q + 3
	} else {
		lx.pos = q + 1
	}
	if !lx.push(f) {
		return token{kind: kEOF}
	}
	return token{kind: kFStart, line: f.line}
}

// fstringText reads the text of an f-string up to its next replacement
// field or its end.
func (lx *lexer) fstringText(f *frame) token {
	for lx.pos < len(lx.src) {
		c := lx.src[lx.pos]
		switch {
		case c == '\\':
			lx.pos++
			if lx.pos >= len(lx.src) {
				continue
			}
			switch n := lx.src[lx.pos]; {
			case n == '\n' || n == '\r':
				lx.newline()
			case n == '{' || n == '}':
				// the brace is read as a brace
			case !f.raw && n == 'N' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '{':
				if end := bytes.IndexByte(lx.src[lx.pos:], '}'); end >= 0 {
					lx.pos += end + 1
				} else {
					lx.pos = len(lx.src)
				}
			default:
				lx.pos++
			}
		case c == '\n' || c == '\r':
			if !f.triple {
				lx.fail = "an f-string that is not closed on its line"
				return token{kind: kEOF}
			}
			if !lx.newline() {
				return token{kind: kEOF}
			}
		case c == f.quote && (!f.triple || lx.pos+2 < len(lx.src) && lx.src[lx.pos+1] == c && lx.src[lx.pos+2] == c):
			if f.triple {
				lx.pos += 3
			} else {
				lx.pos++
			}
			if !lx.pep701 && lx.pos != f.end {
				lx.fail = "an f-string that interpreters before 3.12 read otherwise"
				return token{kind: kEOF}
			}
			lx.stack = lx.stack[:len(lx.stack)-1]
			return token{kind: kFEnd, line: lx.line}
		case c == '{' || c == '}':
			if lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == c {
				lx.pos += 2
				continue
			}
			if c == '}' {
				lx.fail = "a single '}' in an f-string"
				return token{kind: kEOF}
			}
			lx.pos++
			if !lx.push(frame{open: 'E', quote: f.quote, triple: f.triple, depth: lx.brackets}) {
				return token{kind: kEOF}
			}
			return token{kind: kFieldOpen, line: lx.line}
		default:
			lx.pos++
		}
	}
	lx.fail = "an f-string that is not closed"
	return token{kind: kEOF}
}

// formatSpec reads a replacement field's format spec up to its end or a
// nested field.
func (lx *lexer) formatSpec(f *frame) (token, bool) {
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == '{':
			lx.pos++
			if !lx.push(frame{open: 'E', quote: f.quote, triple: f.triple, depth: lx.brackets}) {
				return token{kind: kEOF}, true
			}
			return token{kind: kFieldOpen, line: lx.line}, true
		case c == '}':
			lx.pos++
			lx.stack = lx.stack[:len(lx.stack)-1]
			return token{kind: kFieldClose, line: lx.line}, true
		case c == f.quote || c == '\\':
			lx.fail = "a quote or backslash in an f-string's format spec"
			return token{kind: kEOF}, true
		case c == '\n' || c == '\r':
			if !f.triple {
				lx.fail = "an f-string that is not closed on its line"
				return token{kind: kEOF}, true
			}
			lx.newline()
		default:
			lx.pos++
		}
	}
	lx.fail = "an f-string that is not closed"
	return token{kind: kEOF}, true
}

// opLen is the length of the operator s starts with, 0 if none does.
func opLen(s []byte) int {
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	c, n1, n2 := s[0], at(1), at(2)
	switch c {
	case '*', '/', '<', '>': // ** // << >>, **= //= <<= >>=, <= >=
		switch {
		case n1 == c && n2 == '=':
			return 3
		case n1 == c, n1 == '=':
			return 2
		}
		return 1
	case '.':
		if n1 == '.' && n2 == '.' {
			return 3
		}
		return 1
	case '-':
		if n1 == '>' || n1 == '=' {
			return 2
		}
		return 1
	case '!':
		if n1 == '=' {
			return 2
		}
		return 0
	case ':', '=', '+', '%', '&', '|', '^', '@':
		if n1 == '=' {
			return 2
		}
		return 1
	case '~', ',', ';', '(', ')', '[', ']', '{', '}':
		return 1
	}
	return 0
}

func (lx *lexer) op() (token, bool) {
	s := lx.src[lx.pos:]
	line := lx.line
	if f := lx.top(); f != nil && f.open == 'E' && lx.brackets == f.depth {
		// At a replacement field's own level: '}' ends it, ':' starts its
		// format spec, '!' its conversion ("!=" stays an operator).
		switch {
		case s[0] == '}':
			lx.pos++
			lx.stack = lx.stack[:len(lx.stack)-1]
			return token{kind: kFieldClose, line: line}, true
		case s[0] == ':':
			lx.pos++
			f.open = 'S'
			return token{}, false
		case s[0] == '!' && (len(s) < 2 || s[1] != '='):
			lx.pos++
			for lx.pos < len(lx.src) && isIdentByte(lx.src[lx.pos]) {
				lx.pos++
			}
			return token{}, false
		}
	}
	n := opLen(s)
	c := s[0]
	switch {
	case n == 0:
		lx.fail = "a character that is no Python token: " + string(rune(c))
		return token{}, false
	case n == 1 && (c == '(' || c == '[' || c == '{'):
		if !lx.push(frame{open: c}) {
			return token{}, false
		}
		lx.brackets++
	case n == 1 && (c == ')' || c == ']' || c == '}'):
		f := lx.top()
		if f == nil || f.open != opening(c) {
			lx.fail = "a closing bracket that does not match"
			return token{}, false
		}
		lx.stack = lx.stack[:len(lx.stack)-1]
		lx.brackets--
	}
	lx.pos += n
	return token{kind: kOp, text: s[:n], line: line}, true
}

// opening is the bracket that closer c closes.
func opening(c byte) byte {
	switch c {
	case ')':
		return '('
	case ']':
		return '['
	}
	return '{'
}
