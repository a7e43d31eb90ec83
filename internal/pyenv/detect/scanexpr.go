package detect

import (
	"bytes"
	"strings"
)

// The expression layer of the scan: it follows dotted names through the
// tokens of a statement and records every call whose callee is one, as
// detect.py's visit_Call does (`a.b.c(...)`, `(a).b(...)`; not `f()()`,
// `x[0]()` or `"".join()`), and reads the first argument of `__import__`
// and `importlib.import_module` calls when it is a string constant.

// prevKind is what the last token of an expression was, as far as calls go.
type prevKind uint8

const (
	pNone     prevKind = iota // an operator, a keyword or the start: an operand follows
	pChain                    // a dotted name ends here: '(' calls it
	pAtom                     // another operand ends here: '(' calls it, no dotted name
	pDot                      // '.' after a dotted name
	pDotOther                 // '.' after another operand
	pDefKw                    // def or class: a name follows
	pDefName                  // a def's or class's name: '(' opens its parameters or bases
)

// exprFrame is an open bracket of a statement.
type exprFrame struct {
	open    byte // '(', '[', '{'; 'f' an f-string, 'e' its replacement field
	group   bool // grouping parentheses holding nothing but a dotted name so far
	line    int  // '(': its line; 'f': the f-string's first line
	lambdas int  // lambdas whose ':' is still to come
	// 'f': the first line of the implicit concatenation it is part of
	run int
}

// deferredCall is a call in a decorator or return annotation: ast visits
// those after the function's body, so its callee is resolved then.
type deferredCall struct {
	chain   string
	line    int
	arg     string // a string constant first argument
	hasArg  bool
	escaped bool // ...with a backslash in it
}

// argState reads the first argument of a call, as long as it may still be
// a string constant: '('* string+ ')'* followed by ',' or the call's ')'.
type argState struct {
	active   bool
	depth    int // len(frames) with the call's '(' open; -1 until it is pushed
	wrap     int // grouping parentheses around the argument still open
	phase    uint8
	value    []byte
	escaped  bool
	line     int
	deferred int // the index of its deferred call, or -1 (an import function)
}

// The phases of a first argument.
const (
	aStart  uint8 = iota // only '(' so far
	aString              // strings read
	aClosed              // a parenthesis closed after them
)

type expr struct {
	frames    []exprFrame
	prev      prevKind
	chain     []byte
	chainLine int
	long      bool // the chain outgrew maxNameLen
	lambdas   int  // at statement level
	// lastString: the last token ended a string, which a string that
	// follows concatenates with; runLine: the first line of that run
	lastString bool
	runLine    int
	deferTo    *[]deferredCall
	arg        argState
}

// exprTok follows one token of an expression.
func (s *fileScan) exprTok(t token) {
	ex := &s.ex
	if ex.arg.active {
		s.argTok(t)
	}
	grouped, lastString := false, false
	switch t.kind {
	case kName:
		s.name(t)
	case kNumber:
		ex.prev = pAtom
	case kString:
		if !ex.lastString {
			ex.runLine = t.line
		}
		ex.prev, lastString = pAtom, true
	case kFStart:
		if !ex.lastString {
			ex.runLine = t.line
		}
		ex.frames = append(ex.frames, exprFrame{open: 'f', line: t.line, run: ex.runLine})
		ex.prev = pNone
	case kFieldOpen:
		ex.frames = append(ex.frames, exprFrame{open: 'e'})
		ex.prev = pNone
	case kFieldClose, kFEnd:
		if len(ex.frames) == 0 {
			s.failf("an f-string the scan lost track of (line %d)", t.line)
			return
		}
		f := ex.frames[len(ex.frames)-1]
		ex.frames = ex.frames[:len(ex.frames)-1]
		ex.prev = pNone
		if t.kind == kFEnd {
			ex.prev, lastString, ex.runLine = pAtom, true, f.run
		}
	case kOp:
		grouped = s.op(t)
	}
	ex.lastString = lastString
	if n := len(ex.frames); n > 0 && ex.frames[n-1].group && !grouped && ex.prev != pChain && ex.prev != pDot {
		ex.frames[n-1].group = false
	}
}

func (s *fileScan) name(t token) {
	ex := &s.ex
	w := string(t.text)
	switch {
	case ex.prev == pDot:
		if hardKeyword(w) {
			s.failf("a keyword after '.' (line %d)", t.line)
			return
		}
		if len(ex.chain)+1+len(w) > maxNameLen {
			ex.long = true
		} else {
			ex.chain = append(append(ex.chain, '.'), w...)
		}
		ex.prev = pChain
	case ex.prev == pDotOther:
		ex.prev = pAtom
	case w == "True" || w == "False" || w == "None":
		ex.prev = pAtom
	case w == "lambda":
		if n := len(ex.frames); n > 0 {
			ex.frames[n-1].lambdas++
		} else {
			ex.lambdas++
		}
		ex.prev = pNone
	case w == "import":
		s.failf("import inside an expression (line %d)", t.line)
	case hardKeyword(w):
		ex.prev = pNone
	default:
		ex.chain = append(ex.chain[:0], w...)
		ex.chainLine, ex.long = t.line, len(w) > maxNameLen
		ex.prev = pChain
	}
}

// op follows an operator; it reports whether it opened grouping
// parentheses (whose content decides whether the enclosing group stays
// a dotted name).
func (s *fileScan) op(t token) (grouped bool) {
	ex := &s.ex
	o := string(t.text)
	if ex.prev == pDot || ex.prev == pDotOther {
		s.failf("'%s' after '.' (line %d)", o, t.line)
		return false
	}
	switch o {
	case ".":
		if ex.prev == pChain {
			ex.prev = pDot
		} else {
			ex.prev = pDotOther
		}
	case "...":
		ex.prev = pAtom
	case "(":
		switch ex.prev {
		case pChain:
			s.call()
			ex.frames = append(ex.frames, exprFrame{open: '('})
			if ex.arg.active && ex.arg.depth < 0 {
				ex.arg.depth = len(ex.frames)
			}
		case pAtom, pDefName:
			ex.frames = append(ex.frames, exprFrame{open: '('})
		default:
			ex.frames = append(ex.frames, exprFrame{open: '(', group: true, line: t.line})
			grouped = true
		}
		ex.prev = pNone
	case "[", "{":
		ex.frames = append(ex.frames, exprFrame{open: o[0]})
		ex.prev = pNone
	case ")", "]", "}":
		n := len(ex.frames)
		if n == 0 {
			s.failf("a closing bracket the scan lost track of (line %d)", t.line)
			return false
		}
		f := ex.frames[n-1]
		ex.frames = ex.frames[:n-1]
		if f.group && ex.prev == pChain {
			ex.chainLine = f.line // ast places (a).b at its '('
		} else {
			ex.prev = pAtom
		}
	case ":":
		if n := len(ex.frames); n > 0 && ex.frames[n-1].lambdas > 0 {
			ex.frames[n-1].lambdas--
		}
		ex.prev = pNone
	default:
		ex.prev = pNone
	}
	return grouped
}

// call records a call of the dotted name just read, or defers it. Its
// first argument is read for an import function, and for any deferred
// call (whether it imports is known only once its callee is resolved).
func (s *fileScan) call() {
	ex := &s.ex
	if s.skip > 0 {
		return
	}
	if ex.long {
		s.out.unsureCalls("a dotted name longer than 1024 bytes")
		return
	}
	line, known := s.callLine(ex.chainLine)
	if ex.deferTo != nil {
		if !known {
			s.failf("a decorator with a call in a concatenated f-string (line %d)", ex.chainLine)
			return
		}
		if len(*ex.deferTo) >= maxCalls {
			s.failf("more than 2000 calls in decorators waiting for their function (line %d)", line)
			return
		}
		*ex.deferTo = append(*ex.deferTo, deferredCall{chain: string(ex.chain), line: line})
		ex.arg = argState{active: true, depth: -1, line: line, deferred: len(*ex.deferTo) - 1}
		return
	}
	imports := s.importsBy(ex.chain)
	switch {
	case !known && imports:
		s.failf("an import function called in a concatenated f-string (line %d)", ex.chainLine)
		return
	case !known:
		s.out.unsureCalls("a call in a concatenated f-string")
		return
	case len(s.out.calls) < maxCalls:
		s.addCall(s.resolve(string(ex.chain)), line)
	default:
		s.out.unsureCalls("more than 2000 calls")
	}
	if imports {
		ex.arg = argState{active: true, depth: -1, line: line, deferred: -1}
	}
}

// importsBy reports whether the dotted name chain resolves to __import__
// or importlib.import_module, without building the resolved name.
func (s *fileScan) importsBy(chain []byte) bool {
	head, rest, dot := bytes.Cut(chain, []byte("."))
	full, aliased := s.aliases[string(head)]
	switch {
	case !aliased && !dot:
		return string(head) == "__import__"
	case !aliased:
		return string(head) == "importlib" && string(rest) == "import_module"
	case !dot:
		return isImportFunc(full)
	}
	return full == "importlib" && string(rest) == "import_module"
}

// callLine is the line ast gives a call on line: its own, except in
// Python 3.8, which places an expression of an f-string by looking for its
// text in the first string of the f-string's implicit concatenation, and
// otherwise on that string's first line. Where that line is not the
// call's own, known is false: the scan does not follow that search.
func (s *fileScan) callLine(line int) (at int, known bool) {
	if s.minor != 8 {
		return line, true
	}
	for _, f := range s.ex.frames {
		if f.open == 'f' {
			return line, line == f.run
		}
	}
	return line, true
}

// argTok reads one token of a first argument, before exprTok follows it.
func (s *fileScan) argTok(t token) {
	a := &s.ex.arg
	level := len(s.ex.frames) // the frames open before the token
	switch {
	case t.kind == kString && !t.bytesLit && a.phase != aClosed && level == a.depth+a.wrap:
		a.phase = aString
		a.value = append(a.value, t.text...)
		a.escaped = a.escaped || t.backslash
		if len(a.value) > maxNameLen {
			a.active = false
		}
	case isOp(t, "(") && a.phase == aStart && level == a.depth+a.wrap:
		a.wrap++
	case isOp(t, ")") && a.phase != aStart && a.wrap > 0 && level == a.depth+a.wrap:
		a.wrap--
		a.phase = aClosed
	case (isOp(t, ",") || isOp(t, ")")) && a.phase != aStart && a.wrap == 0 && level == a.depth:
		s.argDone()
	default:
		a.active = false
	}
}

func (s *fileScan) argDone() {
	a := s.ex.arg
	s.ex.arg = argState{}
	if a.deferred >= 0 {
		d := &(*s.ex.deferTo)[a.deferred]
		d.arg, d.hasArg, d.escaped = string(a.value), true, a.escaped
		return
	}
	s.importArg(string(a.value), a.escaped, a.line)
}

// importArg records the import a string constant given to an import
// function names; relative names import nothing, as in detect.py.
func (s *fileScan) importArg(value string, escaped bool, line int) {
	if escaped {
		s.failf("an escape sequence in a module name given to __import__ or import_module (line %d)", line)
		return
	}
	if !strings.HasPrefix(value, ".") {
		s.addImport(value, line)
	}
}

// flush records the calls of a decorated def or class whose body ended.
func (s *fileScan) flush(calls []deferredCall) {
	if s.skip > 0 {
		return
	}
	for _, c := range calls {
		name := s.resolve(c.chain)
		s.addCall(name, c.line)
		if c.hasArg && isImportFunc(name) {
			s.importArg(c.arg, c.escaped, c.line)
		}
	}
}

func isImportFunc(name string) bool { return name == "__import__" || name == "importlib.import_module" }

// resolve maps a dotted name's head through the file's imports.
func (s *fileScan) resolve(chain string) string {
	head, rest, dot := strings.Cut(chain, ".")
	if full, ok := s.aliases[head]; ok {
		head = full
	}
	if dot {
		return head + "." + rest
	}
	return head
}

func (s *fileScan) addCall(name string, line int) {
	if s.skip > 0 {
		return
	}
	if len(s.out.calls) >= maxCalls {
		s.out.unsureCalls("more than 2000 calls")
		return
	}
	s.out.calls = append(s.out.calls, Call{Name: name, File: s.file, Line: line})
}

func (s *fileScan) addImport(module string, line int) {
	if s.skip > 0 || !s.count() {
		return
	}
	s.out.imports = append(s.out.imports, Import{Module: module, File: s.file, Line: line})
}

func (s *fileScan) bind(name, target string) {
	if s.skip > 0 || !s.count() {
		return
	}
	s.aliases[name] = target
}

// count counts one more import name against maxNames.
func (s *fileScan) count() bool {
	if s.out.names >= maxNames {
		s.tooComplex = "more than 100000 import names"
		return false
	}
	s.out.names++
	return true
}

// reset is a fresh expression state that keeps the buffers of ex.
func (ex *expr) reset() expr {
	return expr{frames: ex.frames[:0], chain: ex.chain[:0], arg: argState{value: ex.arg.value[:0]}}
}
