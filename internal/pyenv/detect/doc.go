// Package detect finds what a Python project imports and calls, for
// dependency detection and policy rules, and answers as the target
// interpreter's own ast module would.
//
// Ordinary code is read in the server by a scan (lex.go, scan.go): a
// tokenizer and a reader of statements that follow CPython's rules for the
// little they need — import statements wherever they stand, the try blocks
// that make an import optional, `if TYPE_CHECKING:` bodies, calls and the
// names they resolve through the file's imports. It costs microseconds and
// memory in proportion to the source, and gives up, with a reason, on
// whatever it does not read exactly as the interpreter would (a foreign
// encoding, a non-ASCII name, an f-string that interpreters before 3.12
// read otherwise, broken indentation...). What it gives up on is read by
// the detector: detect.py under the target interpreter, with its ast
// module, in a jail without network. The detector also tells, once per
// interpreter, the names of its standard library.
//
// The package never imports or executes the project's code, and its
// answers never differ from the detector's on what the scan decides (the
// tests compare the two on a corpus and the interpreters' own standard
// libraries).
package detect
