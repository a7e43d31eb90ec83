package runner

import (
	"bytes"
	_ "embed"
	"path"
	"slices"
	"strings"
	"sync"
)

// stdlibList is the standard library's top-level modules, one a line, of
// every interpreter version pyexec supports.
//
//go:embed stdlib.txt
var stdlibList string

// stdlibModules is stdlibList as a set, parsed on first use.
var stdlibModules = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for line := range strings.Lines(stdlibList) {
		if name := strings.TrimSpace(line); name != "" && !strings.HasPrefix(name, "#") {
			set[name] = true
		}
	}
	return set
})

// Lean reports whether the cold driver command line argv (see Argv), in a
// workspace holding only the file name with content code, runs that file as
// its entry point with nothing beyond the standard library: no DataFrame
// loaded for it (--dataframe needs pandas) and code that StdlibOnly
// accepts. Such a run needs none of a fork server's preloads. A false
// answer costs nothing but the speed a lean fork server would have given.
func Lean(argv []string, name string, code []byte) bool {
	if len(argv) < 4 || argv[1] != "-B" || argv[2] != "-c" || argv[3] != driverSource {
		return false
	}
	opts := argv[4:]
	i := slices.Index(opts, "--")
	if i < 0 || i+1 >= len(opts) || path.Clean(opts[i+1]) != path.Clean(name) || slices.Contains(opts[:i], "--dataframe") {
		return false
	}
	return StdlibOnly(code)
}

// StdlibOnly reports whether the Python source code imports nothing but
// standard library modules and has no way to import anything else by name.
// It is a conservative scan of the text, not a parse, cheap enough for
// every request:
//
//   - every `import a.b as c, d` and `from a.b import c` statement, found
//     wherever the word import stands (indented, after `;`, after `try:` or
//     another compound header, joined across backslash continuations), must
//     name standard library modules; a relative import (`from . import x`)
//     or any text around the word that does not read as an import statement
//     (the word in a string or a trailing comment, say) answers false;
//   - the names __import__, importlib, runpy, pkgutil and pip anywhere, and
//     exec, eval and compile other than as an attribute (re.compile is
//     fine), answer false, in strings and comments too;
//   - lines that are only a comment are skipped.
func StdlibOnly(code []byte) bool {
	if dynamicImport(code) {
		return false
	}
	if bytes.Contains(code, []byte("\\\n")) || bytes.Contains(code, []byte("\\\r\n")) {
		code = bytes.ReplaceAll(code, []byte("\\\r\n"), []byte(" "))
		code = bytes.ReplaceAll(code, []byte("\\\n"), []byte(" "))
	}
	for line := range bytes.Lines(code) {
		if !bytes.Contains(line, []byte("import")) {
			continue
		}
		line = bytes.TrimRight(line, " \t\f\r\n")
		if t := bytes.TrimLeft(line, " \t\f"); len(t) == 0 || t[0] == '#' {
			continue
		}
		for seg := range bytes.SplitSeq(line, []byte(";")) {
			if !stdlibImports(seg) {
				return false
			}
		}
	}
	return true
}

// dynamicImport reports whether code names a way to import a module by a
// name computed at run time.
func dynamicImport(code []byte) bool {
	for i := 0; i < len(code); {
		if !isIdentByte(code[i]) {
			i++
			continue
		}
		j := i
		for j < len(code) && isIdentByte(code[j]) {
			j++
		}
		switch string(code[i:j]) {
		case "__import__", "importlib", "runpy", "pkgutil", "pip":
			return true
		case "exec", "eval", "compile":
			if k := lastNonSpace(code[:i]); k < 0 || code[k] != '.' {
				return true
			}
		}
		i = j
	}
	return false
}

// stdlibImports reports whether every occurrence of the word import in the
// statement seg is part of an import statement naming standard library
// modules only.
func stdlibImports(seg []byte) bool {
	for at := 0; ; {
		i := bytes.Index(seg[at:], []byte("import"))
		if i < 0 {
			return true
		}
		i += at
		end := i + len("import")
		at = end
		if (i > 0 && isIdentByte(seg[i-1])) || (end < len(seg) && isIdentByte(seg[end])) {
			continue // part of a longer name: ImportError, imports
		}
		if !importStatement(seg[:i], seg[end:]) {
			return false
		}
	}
}

// importStatement checks one import statement, split around its word
// import into before and after.
func importStatement(before, after []byte) bool {
	// from a.b import c: the module is the dotted name before the word.
	b := bytes.TrimRight(before, " \t\f")
	j := len(b)
	for j > 0 && (isIdentByte(b[j-1]) || b[j-1] == '.') {
		j--
	}
	if mod, rest := b[j:], bytes.TrimRight(b[:j], " \t\f"); len(mod) > 0 && endsWithWord(rest, "from") {
		if mod[0] == '.' {
			return false // relative: the project's own module
		}
		return isStdlibName(mod)
	}
	// import a.b as c, d: a list of dotted names, each perhaps renamed.
	rest := after
	for {
		name, r := takeName(rest, true)
		if len(name) == 0 || !isStdlibName(name) {
			return false
		}
		rest = bytes.TrimLeft(r, " \t\f")
		if kw, r := takeName(rest, false); string(kw) == "as" {
			alias, r := takeName(bytes.TrimLeft(r, " \t\f"), false)
			if len(alias) == 0 {
				return false
			}
			rest = bytes.TrimLeft(r, " \t\f")
		}
		switch {
		case len(rest) == 0 || rest[0] == '#':
			return true
		case rest[0] == ',':
			rest = rest[1:]
		default:
			return false
		}
	}
}

// takeName splits the name (dotted, with dots) at the start of s, after
// blanks, from the rest.
func takeName(s []byte, dotted bool) (name, rest []byte) {
	s = bytes.TrimLeft(s, " \t\f")
	i := 0
	for i < len(s) && (isIdentByte(s[i]) || (dotted && s[i] == '.')) {
		i++
	}
	return s[:i], s[i:]
}

// isStdlibName reports whether the dotted module name is in the standard
// library: its first part is, and no part is empty.
func isStdlibName(name []byte) bool {
	if len(name) == 0 || name[len(name)-1] == '.' || bytes.Contains(name, []byte("..")) {
		return false
	}
	top, _, _ := bytes.Cut(name, []byte("."))
	return stdlibModules()[string(top)]
}

// endsWithWord reports whether s ends with the whole word w.
func endsWithWord(s []byte, w string) bool {
	return bytes.HasSuffix(s, []byte(w)) && (len(s) == len(w) || !isIdentByte(s[len(s)-len(w)-1]))
}

func lastNonSpace(s []byte) int {
	i := len(s) - 1
	for i >= 0 && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f') {
		i--
	}
	return i
}

// isIdentByte: ASCII letters, digits, underscore, and every byte of a
// non-ASCII character (Python identifiers may have them).
func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
