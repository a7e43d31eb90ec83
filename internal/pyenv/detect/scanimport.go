package detect

import "strings"

// importState reads an import statement.
type importState struct {
	phase  uint8
	level  int
	module []byte
	name   []byte
	alias  []byte
	paren  bool
	star   bool
	n      int // names imported so far
}

// The phases of an import statement.
const (
	iName      uint8 = iota // import: a dotted name; from: dots or the module
	iDot                    // import: the part of a dotted name after a '.'
	iAfterName              // after a name: '.', as, ',' or the end
	iAs                     // after as: the alias
	iAfterAs                // after the alias: ',' or the end
	iFromDots               // from: dots, the module or import
	iFromMod                // from: after a part of the module
	iFromDot                // from: after a '.' of the module
	iFromList               // from ... import: '(', '*' or a name
	iFromDone               // from ... import *, or after the ')'
)

// readAlias reads the name after `as`.
func readAlias(im *importState, t token) bool {
	w, isName := word(t)
	im.alias = append(im.alias[:0], w...)
	im.phase = iAfterAs
	return isName && !hardKeyword(w)
}

func word(t token) (string, bool) {
	if t.kind != kName {
		return "", false
	}
	return string(t.text), true
}

// importTok reads a token of `import a.b as c, d`.
func (s *fileScan) importTok(t token) {
	im := &s.st.imp
	w, isName := word(t)
	ok := true
	switch im.phase {
	case iName, iDot:
		ok = isName && !hardKeyword(w)
		if im.phase == iName {
			im.name = im.name[:0]
		} else {
			im.name = append(im.name, '.')
		}
		im.name = append(im.name, w...)
		im.phase = iAfterName
	case iAfterName:
		switch {
		case isOp(t, "."):
			im.phase = iDot
		case w == "as":
			im.phase = iAs
		case isOp(t, ","):
			s.imported(nil)
			im.phase = iName
		default:
			ok = s.endsStatement(t)
		}
	case iAs:
		ok = readAlias(im, t)
	case iAfterAs:
		switch {
		case isOp(t, ","):
			s.imported(im.alias)
			im.phase = iName
		default:
			ok = s.endsStatement(t)
		}
	}
	if ok && len(im.name) > maxNameLen {
		s.failf("a module name longer than 1024 bytes (line %d)", t.line)
	}
	if !ok {
		s.failf("an import statement the scan does not read (line %d)", t.line)
	}
}

// imported records `import name [as alias]`.
func (s *fileScan) imported(alias []byte) {
	im := &s.st.imp
	module := string(im.name)
	s.addImport(module, s.st.line)
	if alias != nil {
		s.bind(string(alias), module)
		return
	}
	top, _, _ := strings.Cut(module, ".")
	s.bind(top, top)
}

// endsStatement reads a ';' ending an import statement.
func (s *fileScan) endsStatement(t token) bool {
	if !isOp(t, ";") {
		return false
	}
	inline := s.st.inline
	s.endStatement()
	s.st = stmt{inline: inline}
	return true
}

// endImport ends an import statement at its ';' or line end.
func (s *fileScan) endImport() {
	im := &s.st.imp
	switch {
	case s.st.kind == sImport && im.phase == iAfterName:
		s.imported(nil)
	case s.st.kind == sImport && im.phase == iAfterAs:
		s.imported(im.alias)
	case s.st.kind == sFrom && im.phase == iFromDone:
	case s.st.kind == sFrom && im.phase == iAfterName && !im.paren:
		s.fromImported(nil)
	case s.st.kind == sFrom && im.phase == iAfterAs && !im.paren:
		s.fromImported(im.alias)
	default:
		s.failf("an import statement the scan does not read (line %d)", s.st.line)
	}
}

// fromTok reads a token of `from .a.b import (c as d, e)`.
func (s *fileScan) fromTok(t token) {
	im := &s.st.imp
	w, isName := word(t)
	ok := true
	switch im.phase {
	case iName, iFromDots:
		im.phase = iFromDots
		switch {
		case isOp(t, "."):
			im.level++
		case isOp(t, "..."):
			im.level += 3
		case w == "import" && im.level > 0:
			im.phase = iFromList
		case isName && !hardKeyword(w):
			im.module = append(im.module[:0], w...)
			im.phase = iFromMod
		default:
			ok = false
		}
	case iFromMod:
		switch {
		case isOp(t, "."):
			im.phase = iFromDot
		case w == "import":
			im.phase = iFromList
			if im.level == 0 {
				s.addImport(string(im.module), s.st.line)
			}
		default:
			ok = false
		}
	case iFromDot:
		ok = isName && !hardKeyword(w)
		im.module = append(append(im.module, '.'), w...)
		im.phase = iFromMod
	case iFromList:
		switch {
		case isOp(t, "(") && !im.paren && im.n == 0:
			im.paren = true
		case isOp(t, "*") && !im.paren && im.n == 0:
			im.phase = iFromDone
		case isOp(t, ")") && im.paren && im.n > 0:
			im.phase = iFromDone
		case isName && !hardKeyword(w):
			im.name = append(im.name[:0], w...)
			im.phase = iAfterName
		default:
			ok = false
		}
	case iAfterName, iAfterAs:
		switch {
		case w == "as" && im.phase == iAfterName:
			im.phase = iAs
		case isOp(t, ","):
			s.fromImported(aliasIf(im))
			im.phase = iFromList
		case isOp(t, ")") && im.paren:
			s.fromImported(aliasIf(im))
			im.phase = iFromDone
		default:
			ok = s.endsStatement(t)
		}
	case iAs:
		ok = readAlias(im, t)
	case iFromDone:
		ok = s.endsStatement(t)
	}
	if len(im.module) > maxNameLen || len(im.name) > maxNameLen {
		s.failf("a module name longer than 1024 bytes (line %d)", t.line)
	}
	if !ok {
		s.failf("an import statement the scan does not read (line %d)", t.line)
	}
}

func aliasIf(im *importState) []byte {
	if im.phase == iAfterAs {
		return im.alias
	}
	return nil
}

// fromImported binds `from module import name [as alias]`.
func (s *fileScan) fromImported(alias []byte) {
	im := &s.st.imp
	im.n++
	if im.level > 0 {
		return // relative: detect.py binds nothing
	}
	name := string(im.name)
	if alias != nil {
		s.bind(string(alias), string(im.module)+"."+name)
		return
	}
	s.bind(name, string(im.module)+"."+name)
}
