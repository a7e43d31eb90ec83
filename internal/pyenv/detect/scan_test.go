package detect

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// scanOne scans one file main.py as Python 3.minor.
func scanOne(t *testing.T, src string, minor int) (*found, string) {
	t.Helper()
	f, unsure, err := scanProject([]File{{Path: "main.py", Data: []byte(src)}}, minor)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return f, unsure
}

// imports renders imports as "module:line" ("?" marks an optional one).
func imports(f *found) string {
	var s []string
	for _, im := range f.imports {
		opt := ""
		if im.Optional {
			opt = "?"
		}
		s = append(s, fmt.Sprintf("%s:%d%s", im.Module, im.Line, opt))
	}
	return strings.Join(s, " ")
}

func calls(f *found) string {
	var s []string
	for _, c := range f.calls {
		s = append(s, fmt.Sprintf("%s:%d", c.Name, c.Line))
	}
	return strings.Join(s, " ")
}

func TestScanImports(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"plain and dotted", "import os, sys\nimport a.b.c as d, e\n", "os:1 sys:1 a.b.c:2 e:2"},
		{"from, relative, star", "from x.y import z as w\nfrom . import sib\nfrom ..pkg import q\nfrom m import *\n", "x.y:1 m:4"},
		{"parenthesized names over lines", "from pkg import (\n    a as b,\n    c,\n)\nimport z\n", "pkg:1 z:5"},
		{"inside functions, classes, if blocks", "def f():\n    import numpy as np\nclass C:\n    if x:\n        import yaml\n", "numpy:2 yaml:5"},
		{"after ; and on a header's line", "x = 1; import a\nif y: import b; import c\n", "a:1 b:2 c:2"},
		{"backslash continuation", "import a, \\\n    b\n", "a:1 b:1"},
		{"guarded try is optional", "try:\n    import ujson as json\nexcept ImportError:\n    import json\n", "ujson:2? json:4"},
		{"unguarded try is not", "try:\n    import lxml\nexcept (ValueError, KeyError):\n    pass\n", "lxml:2"},
		{"tuple guard, except*, bare except", "try:\n    import a\nexcept (OSError, ModuleNotFoundError):\n    pass\ntry:\n    import b\nexcept:\n    pass\n", "a:2? b:6?"},
		{"nested tries", "try:\n    try:\n        import a\n    except ValueError:\n        import b\nexcept Exception:\n    pass\nimport c\n", "a:3? b:5? c:8"},
		{"guard only in a later clause", "try:\n    import a\nexcept KeyError:\n    pass\nexcept BaseException:\n    pass\nelse:\n    import b\nfinally:\n    import c\n", "a:2? b:8 c:10"},
		{"TYPE_CHECKING bodies are skipped", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\nelif x:\n    import a\nelse:\n    import b\nif typing.TYPE_CHECKING: import c\n", "typing:1 a:5 b:7"},
		{"not TYPE_CHECKING is read", "if not TYPE_CHECKING:\n    import a\nif TYPE_CHECKING or x:\n    import b\n", "a:2 b:4"},
		{"__import__ and import_module", "__import__('toml')\nimport importlib as il\nil.import_module(\"yaml\")\nimportlib.import_module('.rel')\n__import__(name)\n", "toml:1 importlib:2 yaml:3"},
		{"from importlib import import_module", "from importlib import import_module as im\nim(('a' 'b'), package=None)\n", "importlib:1 ab:2"},
		{"strings and comments are not imports", "s = 'import os'\n# import sys\n\"\"\"\nimport json\n\"\"\"\n", ""},
		{"decorator with import_module", "from importlib import import_module\n@import_module('deco')\ndef f(): pass\n", "importlib:1 deco:2"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			f, unsure := scanOne(t, tt.src, 12)
			if unsure != "" {
				t.Fatalf("unsure: %s", unsure)
			}
			if got := imports(f); got != tt.want {
				t.Errorf("imports %q, want %q", got, tt.want)
			}
		})
	}
}

func TestScanCalls(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"resolved through imports", "import subprocess as sp\nfrom os import system\nsp.run(['x'])\nsystem('id')\n", "subprocess.run:3 os.system:4"},
		{"only dotted callees", "f()()\nx[0]()\n''.join(y)\n(a).b()\nc.d(e.f())\n", "f:1 a.b:4 c.d:5 e.f:5"},
		{"defs and classes are not calls", "def f(x=g()):\n    pass\nclass C(Base, metaclass=M):\n    pass\n", "g:1"},
		{"f-string fields", "x = f'{a.b()} {c(d()):>{e()}}'\ny = f\"\"\"\n{g()}\n\"\"\"\n", "a.b:1 c:1 d:1 e:1 g:3"},
		{"decorators resolve after the body", "@np.vectorize()\ndef f():\n    import numpy as np\n", "numpy.vectorize:1"},
		{"lambda colons in headers", "if (lambda: x())():\n    y()\n", "x:1 y:2"},
		{"TYPE_CHECKING bodies hold no calls", "if TYPE_CHECKING:\n    a()\nelse:\n    b()\n", "b:4"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			f, unsure := scanOne(t, tt.src, 12)
			if unsure != "" || f.callsUnsure != "" {
				t.Fatalf("unsure: %q %q", unsure, f.callsUnsure)
			}
			if got := calls(f); got != tt.want {
				t.Errorf("calls %q, want %q", got, tt.want)
			}
		})
	}
}

// TestScanLeavesToTheInterpreter covers what the scan does not decide:
// the detector reads those files.
func TestScanLeavesToTheInterpreter(t *testing.T) {
	cases := []struct {
		name, src string
		minor     int
	}{
		{"latin-1 cookie over non-ASCII", "# -*- coding: latin-1 -*-\ns = '\xe9'\nimport a\n", 12},
		{"not UTF-8", "s = '\xff\xfe'\nimport a\n", 12},
		{"NUL byte", "import a\x00\n", 12},
		{"non-ASCII identifier", "café = 1\nimport a\n", 12},
		{"lone carriage return", "import a\rimport b\n", 12},
		{"unterminated string", "import a\ns = 'x\n", 12},
		{"unclosed bracket", "import a\nf(\n", 12},
		{"unexpected indent", "import a\n    import b\n", 12},
		{"dedent to no level", "if x:\n        a()\n    b()\n", 12},
		{"tab and space disagree", "if x:\n\tif y:\n        a()\n", 12},
		{"header without a body", "if x:\nimport a\n", 12},
		{"too many brackets", "import a\nx = " + strings.Repeat("(", 201) + strings.Repeat(")", 201) + "\n", 12},
		{"escape in __import__'s name", "__import__('\\x61')\n", 12},
		{"f-string with nested quotes before 3.12", "x = f'{d['k']}'\n", 11},
		{"a 3.8 call on another line of a concatenated f-string", "x = ('a'\n     f'{__import__(\"b\")}')\n", 8},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if _, unsure := scanOne(t, tt.src, tt.minor); unsure == "" {
				t.Errorf("the scan decided %q", tt.src)
			}
		})
	}
	t.Run("3.12 reads nested quotes", func(t *testing.T) {
		if f, unsure := scanOne(t, "x = f'{d.get('k')}'\n", 12); unsure != "" || calls(f) != "d.get:1" {
			t.Errorf("unsure %q, calls %q", unsure, calls(f))
		}
	})
	t.Run("calls only", func(t *testing.T) {
		f, unsure := scanOne(t, "import re\nmatch x:\n    case Point(x=0):\n        import a\n", 12)
		if unsure != "" || f.callsUnsure == "" || imports(f) != "re:1 a:4" {
			t.Errorf("unsure %q, calls unsure %q, imports %q", unsure, f.callsUnsure, imports(f))
		}
	})
}

// TestScanWalkOrder: the project's files are read as os.walk meets them,
// skipping hidden directories and __pycache__, and not-.py files.
func TestScanWalkOrder(t *testing.T) {
	files := []File{{Path: "pkg/sub/z.py", Data: []byte("import z\n")}, {Path: "b.py", Data: []byte("import b\n")},
		{Path: "pkg/a.py", Data: []byte("import pa\n")}, {Path: "./a.py", Data: []byte("import a\n")},
		{Path: ".venv/x.py", Data: []byte("import hidden\n")}, {Path: "__pycache__/c.py", Data: []byte("import cached\n")},
		{Path: "notes.txt", Data: []byte("import fake\n")}, {Path: ".hidden.py", Data: []byte("import dotfile\n")}}
	f, unsure, err := scanProject(files, 12)
	if err != nil || unsure != "" {
		t.Fatal(err, unsure)
	}
	var got []string
	for _, im := range f.imports {
		got = append(got, im.File+":"+im.Module)
	}
	want := ".hidden.py:dotfile a.py:a b.py:b pkg/a.py:pa pkg/sub/z.py:z"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestScanTooComplex(t *testing.T) {
	src := strings.Repeat("import a\n", maxNames+1)
	_, _, err := scanProject([]File{{Path: "main.py", Data: []byte(src)}}, 12)
	if !errors.Is(err, ErrTooComplex) {
		t.Errorf("error %v, want ErrTooComplex", err)
	}
}

// BenchmarkScanSnippet scans an assistant's typical snippet: what detection
// costs the server for new code.
func BenchmarkScanSnippet(b *testing.B) {
	files := readTree(b, "testdata/corpus", "")
	var src []byte
	for _, f := range files {
		if f.Path == "corpus/analysis.py" {
			src = f.Data
		}
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, unsure, err := scanProject([]File{{Path: "main.py", Data: src}}, 12); unsure != "" || err != nil {
			b.Fatal(unsure, err)
		}
	}
}
