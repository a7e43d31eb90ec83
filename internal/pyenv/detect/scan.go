package detect

import (
	"errors"
	"fmt"
	"strings"
)

// The scan reads a file's statements from the lexer's tokens and finds what
// the jailed detector (detect.py) would: every absolute import (`import a.b
// as c, d`, `from a.b import c`, anywhere — in functions, in try and if
// blocks), `__import__` and `importlib.import_module` called with a string
// constant, whether an import is guarded by `try: … except ImportError`, the
// bodies of `if TYPE_CHECKING:` skipped, and every call whose callee is a
// dotted name, resolved through the file's imports. It keeps the detector's
// order where that order matters (calls in decorators and return
// annotations are resolved after the function's body, as ast visits them)
// and gives up, with a reason, on what it cannot read exactly.

// ErrTooComplex marks code beyond what detection reads: more import names
// than maxNames, or nesting deeper than the interpreter's ast can be walked.
// It is the request's fault (a 400).
var ErrTooComplex = errors.New("the code is beyond what import detection reads")

const (
	// maxNames bounds the import records and import-bound names of one
	// project, and so the scan's memory.
	maxNames = 100_000
	// maxCalls is the detector's bound on the calls it reports.
	maxCalls = 2000
	// maxNameLen bounds a dotted name the scan builds.
	maxNameLen = 1024
	// maxIndents is CPython's bound on levels of indentation.
	maxIndents = 100
	// maxClauseTokens bounds the tokens of an `if` test or an `except`
	// clause the scan keeps to read them.
	maxClauseTokens = 64
)

// guards are the exception names whose handler makes the imports of a
// try body optional (detect.py's GUARDS).
var guards = map[string]bool{"ImportError": true, "ModuleNotFoundError": true, "Exception": true, "BaseException": true}

// found is what the scan found in a project so far.
type found struct {
	imports []Import
	calls   []Call
	names   int // import records and import-bound names
	// callsUnsure says why the calls are not the detector's (a match
	// statement, type parameters, more than maxCalls...): the imports are.
	callsUnsure string
}

// stmtKind is the kind of the statement being read.
type stmtKind uint8

const (
	sStart       stmtKind = iota // nothing read yet
	sSimple                      // an expression, assignment, return...
	sImport                      // import a.b as c
	sFrom                        // from a import b
	sHeader                      // a compound statement's header, up to its ':'
	sDecorator                   // @decorator
	sAfterHeader                 // a header's ':' was read: its body follows
)

type stmt struct {
	kind   stmtKind
	kw     string // sHeader: its keyword ("def" for async def)
	line   int
	inline bool // the same-line body of a header
	// sHeader
	toks     []token // the test of if/elif, the clause of except
	over     bool    // toks outgrew maxClauseTokens
	defPhase int     // def/class: 0 before the name, 1 after it
	deferred []deferredCall
	tryIdx   int  // except: the try it belongs to
	soft     bool // starts with match or case (soft keywords)
	ntok     int  // tokens read
	softOK   bool // the soft keyword's next token can start a subject or pattern
	block    blockKind
	imp      importState
}

type blockKind uint8

const (
	bPlain blockKind = iota
	bTry             // a try body: its imports are optional if a handler guards them
	bSkip            // an `if TYPE_CHECKING:` body: nothing in it counts
	bDef             // a def or class body: its decorators' calls are resolved when it ends
)

type block struct {
	ind      indent // the header line's
	kind     blockKind
	inline   bool
	start    int // bTry: the first import of the body
	deferred []deferredCall
}

// pendingTry is a try statement whose body is over, waiting for its
// except, else and finally clauses.
type pendingTry struct {
	ind        indent
	start, end int // its body's imports
	guarded    bool
}

// fileScan reads one file.
type fileScan struct {
	lx      *lexer
	minor   int // the interpreter is 3.minor
	out     *found
	file    string
	aliases map[string]string
	// unsure says why the detector must read this file; tooComplex that
	// nobody will (ErrTooComplex).
	unsure, tooComplex string

	skip    int // open `if TYPE_CHECKING:` bodies
	blocks  []block
	indents []indent
	tries   []pendingTry
	waiting bool // a header ended its line: an indented body must follow
	lineInd indent
	newLine bool // the next token is the first of its line
	deco    []deferredCall
	decos   bool // decorators wait for their def or class

	st stmt
	ex expr
}

func scanFile(path string, src []byte, minor int, out *found) (unsure, tooComplex string) {
	s := &fileScan{lx: newLexer(src, minor >= 12), minor: minor, out: out, file: path, aliases: map[string]string{},
		indents: []indent{{}}}
	s.run()
	if s.tooComplex != "" {
		return "", s.tooComplex
	}
	return s.unsure, ""
}

func (s *fileScan) failf(format string, args ...any) {
	if s.unsure == "" {
		s.unsure = fmt.Sprintf(format, args...)
	}
}

func (s *fileScan) done() bool { return s.unsure != "" || s.tooComplex != "" }

func (s *fileScan) run() {
	for !s.done() {
		t := s.lx.next()
		if s.lx.fail != "" {
			s.failf("%s (line %d)", s.lx.fail, s.lx.line)
			return
		}
		switch t.kind {
		case kEOF:
			s.end()
			return
		case kLineStart:
			s.lineStart(t.ind)
		case kNewline:
			s.newline()
		default:
			s.token(t)
		}
	}
}

// lineStart checks the indentation of a new logical line as CPython does
// and closes the blocks it ends.
func (s *fileScan) lineStart(ind indent) {
	top := s.indents[len(s.indents)-1]
	if s.waiting {
		if ind.c8 <= top.c8 || ind.c1 <= top.c1 {
			s.failf("a block that is not indented (line %d)", s.lx.line)
			return
		}
		if len(s.indents) > maxIndents {
			s.failf("more than 100 levels of indentation (line %d)", s.lx.line)
			return
		}
		s.indents = append(s.indents, ind)
		s.waiting = false
		s.lineInd, s.newLine = ind, true
		return
	}
	if ind.c8 > top.c8 {
		s.failf("an unexpected indent (line %d)", s.lx.line)
		return
	}
	for ind.c8 < top.c8 {
		s.indents = s.indents[:len(s.indents)-1]
		top = s.indents[len(s.indents)-1]
	}
	if ind != top {
		s.failf("indentation that does not match an outer level (line %d)", s.lx.line)
		return
	}
	s.closeBlocks(ind.c8)
	for len(s.tries) > 0 && s.tries[len(s.tries)-1].ind.c8 > ind.c8 {
		s.finishTry()
	}
	s.lineInd, s.newLine = ind, true
}

// closeBlocks closes the blocks whose header is indented at least c8.
func (s *fileScan) closeBlocks(c8 int) {
	for len(s.blocks) > 0 && !s.blocks[len(s.blocks)-1].inline && s.blocks[len(s.blocks)-1].ind.c8 >= c8 {
		s.closeBlock()
	}
}

func (s *fileScan) closeBlock() {
	b := s.blocks[len(s.blocks)-1]
	s.blocks = s.blocks[:len(s.blocks)-1]
	for len(s.tries) > 0 && s.tries[len(s.tries)-1].ind.c8 > b.ind.c8 {
		s.finishTry() // a try inside the body is complete
	}
	switch b.kind {
	case bTry:
		s.tries = append(s.tries, pendingTry{ind: b.ind, start: b.start, end: len(s.out.imports)})
	case bSkip:
		s.skip--
	case bDef:
		s.flush(b.deferred)
	}
}

// finishTry marks the body's imports of the innermost pending try
// optional if one of its handlers guards them.
func (s *fileScan) finishTry() {
	t := s.tries[len(s.tries)-1]
	s.tries = s.tries[:len(s.tries)-1]
	if t.guarded {
		for i := t.start; i < t.end; i++ {
			s.out.imports[i].Optional = true
		}
	}
}

func (s *fileScan) end() {
	switch {
	case s.waiting:
		s.failf("a block that is not indented (end of file)")
	case s.decos:
		s.failf("a decorator that decorates nothing (end of file)")
	case s.st.kind != sStart:
		s.failf("a statement that is not finished (end of file)")
	}
	if s.done() {
		return
	}
	s.closeBlocks(-1)
	for len(s.tries) > 0 {
		s.finishTry()
	}
}

// newline ends a logical line.
func (s *fileScan) newline() {
	if s.st.kind == sAfterHeader {
		s.blocks = append(s.blocks, s.newBlock(false))
		s.waiting = true
		s.st = stmt{}
		return
	}
	s.endStatement()
	for len(s.blocks) > 0 && s.blocks[len(s.blocks)-1].inline {
		s.closeBlock()
	}
	s.st = stmt{}
}

// newBlock opens the body of the header just read.
func (s *fileScan) newBlock(inline bool) block {
	b := block{ind: s.lineInd, kind: s.st.block, inline: inline}
	switch b.kind {
	case bTry:
		b.start = len(s.out.imports)
	case bSkip:
		s.skip++
	case bDef:
		b.deferred = append(s.deco, s.st.deferred...)
		s.deco, s.decos = nil, false
	}
	return b
}

func (s *fileScan) endStatement() {
	switch s.st.kind {
	case sImport, sFrom:
		s.endImport()
	case sHeader:
		s.failf("a %s statement without its ':' (line %d)", s.st.kw, s.st.line)
	case sDecorator:
		s.decos = true
	}
	if len(s.ex.frames) > 0 {
		s.failf("a statement that ends inside brackets (line %d)", s.lx.line)
	}
	s.ex = s.ex.reset()
}

var compound = map[string]bool{"if": true, "elif": true, "else": true, "while": true, "for": true, "with": true,
	"try": true, "except": true, "finally": true, "def": true, "class": true, "async": true}

func (s *fileScan) token(t token) {
	switch s.st.kind {
	case sStart:
		s.begin(t, s.st.inline)
	case sAfterHeader:
		inline := s.newBlock(true)
		s.blocks = append(s.blocks, inline)
		s.st = stmt{}
		s.begin(t, true)
	case sImport:
		s.importTok(t)
	case sFrom:
		s.fromTok(t)
	default:
		s.stmtTok(t)
	}
}

// begin reads the first token of a statement.
func (s *fileScan) begin(t token, inline bool) {
	first := s.newLine
	s.newLine = false
	word := ""
	if t.kind == kName {
		word = string(t.text)
	}
	if first && len(s.tries) > 0 && s.tries[len(s.tries)-1].ind == s.lineInd &&
		word != "except" && word != "else" && word != "finally" {
		s.finishTry()
	}
	if s.decos && word != "def" && word != "class" && word != "async" && !(t.kind == kOp && string(t.text) == "@") {
		s.failf("a decorator not followed by def or class (line %d)", t.line)
		return
	}
	if inline && compound[word] {
		s.failf("a compound statement on its header's line (line %d)", t.line)
		return
	}
	s.st = stmt{kind: sSimple, line: t.line, inline: inline}
	switch {
	case word == "import":
		s.st.kind = sImport
		return
	case word == "from":
		s.st.kind = sFrom
		return
	case word == "except":
		if !first || len(s.tries) == 0 || s.tries[len(s.tries)-1].ind != s.lineInd {
			s.failf("an except clause without its try (line %d)", t.line)
			return
		}
		s.st.kind, s.st.kw, s.st.tryIdx = sHeader, word, len(s.tries)-1
		return
	case compound[word]:
		s.st.kind, s.st.kw = sHeader, word
		switch word {
		case "try":
			s.st.block = bTry
		case "def", "class":
			s.st.block = bDef
			s.ex.prev = pDefKw
		}
		return
	case word == "match" || word == "case":
		s.st.soft, s.st.kw = true, word
	case t.kind == kOp && string(t.text) == "@":
		s.st.kind = sDecorator
		s.ex.deferTo = &s.deco
		return
	}
	s.stmtTok(t)
}

// stmtTok reads a token of a simple statement, a header or a decorator.
func (s *fileScan) stmtTok(t token) {
	st := &s.st
	top := len(s.ex.frames) == 0
	op := ""
	if t.kind == kOp {
		op = string(t.text)
	}
	st.ntok++
	if st.soft && st.ntok == 2 {
		w := string(t.text)
		st.softOK = t.kind == kName && (!hardKeyword(w) || w == "None" || w == "True" || w == "False" || w == "not" ||
			w == "await" || w == "lambda") || t.kind == kNumber || t.kind == kString || t.kind == kFStart ||
			op == "(" || op == "[" || op == "{" || op == "-" || op == "+" || op == "*" || op == "~" || op == "..."
	}
	switch {
	case top && op == ";":
		inline := st.inline
		s.endStatement()
		s.st = stmt{inline: inline}
		return
	case top && op == ":" && s.ex.lambdas > 0:
		s.ex.lambdas--
		s.exprTok(t)
		return
	case top && op == ":" && (st.kind == sHeader || st.soft && st.softOK):
		s.headerEnd()
		return
	case st.kind == sHeader && st.kw == "def" && top && op == "->":
		s.ex.deferTo = &st.deferred
	case st.kind == sHeader && (st.kw == "def" || st.kw == "class") && st.defPhase == 0:
		if t.kind != kName || hardKeyword(string(t.text)) {
			s.failf("a %s without a name (line %d)", st.kw, t.line)
			return
		}
		st.defPhase = 1
		s.ex.prev = pDefName
		return
	case st.kind == sHeader && st.kw == "async":
		switch string(t.text) {
		case "def":
			st.kw, st.block = "def", bDef
			s.ex.prev = pDefKw
			return
		case "for", "with":
			st.kw = string(t.text)
			return
		}
		s.failf("async before neither def, for nor with (line %d)", t.line)
		return
	case st.kind == sHeader && (st.kw == "def" || st.kw == "class") && st.defPhase == 1 && top && op == "[":
		s.out.unsureCalls("type parameters")
	case st.kind == sHeader && (st.kw == "if" || st.kw == "elif" || st.kw == "except"):
		if st.kw == "except" && len(st.toks) == 0 && !st.over && op == "*" {
			return // except* (3.11)
		}
		if len(st.toks) < maxClauseTokens {
			st.toks = append(st.toks, t)
		} else {
			st.over = true
		}
	}
	s.exprTok(t)
}

// headerEnd reads a header's ':'.
func (s *fileScan) headerEnd() {
	st := &s.st
	if st.soft {
		if st.kw == "match" {
			s.out.unsureCalls("a match statement")
		}
		st.kind = sAfterHeader
		s.ex.deferTo = nil
		return
	}
	switch st.kw {
	case "if", "elif":
		tc, sure := typeChecking(st.toks, st.over)
		if !sure {
			s.failf("an if test the scan cannot read (line %d)", st.line)
			return
		}
		if tc {
			st.block = bSkip
		}
	case "except":
		g, sure := guarded(st.toks, st.over)
		if !sure {
			s.failf("an except clause the scan cannot read (line %d)", st.line)
			return
		}
		if g {
			s.tries[st.tryIdx].guarded = true
		}
	case "def", "class":
		if st.defPhase == 0 {
			s.failf("a %s without a name (line %d)", st.kw, st.line)
			return
		}
	}
	if len(s.ex.frames) > 0 {
		s.failf("a header that ends inside brackets (line %d)", st.line)
		return
	}
	st.kind = sAfterHeader
	s.ex = s.ex.reset()
}

// typeChecking reports whether an if test is `TYPE_CHECKING` or
// `typing.TYPE_CHECKING` (perhaps parenthesized), as detect.py's
// is_type_checking does.
func typeChecking(toks []token, over bool) (is, sure bool) {
	if over {
		for _, t := range toks {
			if t.kind != kOp || string(t.text) != "(" {
				return false, true
			}
		}
		return false, false
	}
	toks = unwrap(toks)
	var parts []string
	for i, t := range toks {
		switch {
		case i%2 == 0 && t.kind == kName:
			parts = append(parts, string(t.text))
		case i%2 == 1 && t.kind == kOp && string(t.text) == ".":
		default:
			return false, true
		}
	}
	name := strings.Join(parts, ".")
	return len(toks)%2 == 1 && (name == "TYPE_CHECKING" || name == "typing.TYPE_CHECKING"), true
}

// guarded reports whether an except clause (the tokens after `except`)
// catches an import error, as detect.py's guards_import does: a bare
// except, or a type — or a tuple holding one — that is exactly one of the
// guards' names.
func guarded(toks []token, over bool) (is, sure bool) {
	if over {
		return false, false
	}
	if n := len(toks); n >= 2 && toks[n-2].kind == kName && string(toks[n-2].text) == "as" {
		toks = toks[:n-2]
	}
	if len(toks) == 0 {
		return true, true
	}
	inner := unwrap(toks)
	elems := [][]token{inner}
	switch n := len(inner); {
	case hasTopComma(inner):
		return false, false // a tuple without parentheses (3.14)
	case n >= 2 && isOp(inner[0], "(") && isOp(inner[n-1], ")") && closes(inner):
		elems = splitTop(inner[1 : n-1]) // a tuple: unwrap keeps its parentheses
	}
	for _, e := range elems {
		if name, ok := dotted(unwrap(e)); ok && guards[name] {
			return true, true
		}
	}
	return false, true
}

// unwrap strips the parentheses around toks as long as they hold no
// tuple: `((a))` is a, `((a, b))` is (a, b).
func unwrap(toks []token) []token {
	for len(toks) >= 2 && isOp(toks[0], "(") && isOp(toks[len(toks)-1], ")") && closes(toks) {
		inner := toks[1 : len(toks)-1]
		if hasTopComma(inner) || len(inner) == 0 {
			return toks
		}
		toks = inner
	}
	return toks
}

// closes reports whether the parenthesis opening toks closes at its end.
func closes(toks []token) bool {
	depth := 0
	for i, t := range toks {
		depth += nesting(t)
		if depth == 0 && i != len(toks)-1 {
			return false
		}
	}
	return depth == 0
}

func hasTopComma(toks []token) bool {
	return len(splitTop(toks)) > 1 || len(toks) > 0 && isOp(toks[len(toks)-1], ",")
}

// splitTop splits toks at its commas outside brackets; a trailing comma
// adds no element.
func splitTop(toks []token) [][]token {
	var out [][]token
	depth, from := 0, 0
	for i, t := range toks {
		depth += nesting(t)
		if depth == 0 && isOp(t, ",") {
			out = append(out, toks[from:i])
			from = i + 1
		}
	}
	if from < len(toks) {
		out = append(out, toks[from:])
	}
	return out
}

// dotted returns the dotted name toks spell, if they spell one.
func dotted(toks []token) (string, bool) {
	if len(toks)%2 == 0 {
		return "", false
	}
	var b strings.Builder
	for i, t := range toks {
		switch {
		case i%2 == 0 && t.kind == kName && !hardKeyword(string(t.text)):
			b.Write(t.text)
		case i%2 == 1 && isOp(t, "."):
			b.WriteByte('.')
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isOp(t token, op string) bool { return t.kind == kOp && string(t.text) == op }

// nesting is +1 for an opening bracket, -1 for a closing one.
func nesting(t token) int {
	switch {
	case isOp(t, "(") || isOp(t, "[") || isOp(t, "{"):
		return 1
	case isOp(t, ")") || isOp(t, "]") || isOp(t, "}"):
		return -1
	}
	return 0
}

var hardKeywords = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true, "import": true,
	"in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true}

func hardKeyword(w string) bool { return hardKeywords[w] }

func (f *found) unsureCalls(why string) {
	if f.callsUnsure == "" {
		f.callsUnsure = why
	}
}
