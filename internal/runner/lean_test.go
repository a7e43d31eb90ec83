package runner

import (
	"strings"
	"testing"
)

func TestStdlibOnly(t *testing.T) {
	for _, tt := range []struct {
		name string
		code string
		lean bool
	}{
		{"no import", "print(1)\n", true},
		{"empty", "", true},
		{"stdlib", "import os\nimport sys\nprint(os.getcwd())\n", true},
		{"stdlib list with aliases", "import os, json as j, xml.etree.ElementTree as ET\n", true},
		{"from stdlib", "from collections import OrderedDict\nfrom os.path import join, dirname\n", true},
		{"from stdlib, parenthesized names", "from typing import (\n    Any,\n    Optional,\n)\n", true},
		{"future", "from __future__ import annotations\n", true},
		{"indented inside try", "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n", true},
		{"after a semicolon", "x = 1; import math\n", true},
		{"after try colon", "try: import zlib\nexcept ImportError: pass\n", true},
		{"inside a function", "def f():\n\timport random\n\treturn random.random()\n", true},
		{"backslash continuation", "import os, \\\n    sys\n", true},
		{"CRLF line ends", "import os\r\nimport sys\r\n", true},
		{"re.compile is no dynamic import", "import re\nr = re.compile('a+')\n", true},
		{"names that contain import", "important = 1\nreimport = 2\nraise ImportError('x')\n", true},
		{"comment line naming numpy", "# import numpy\nprint(1)\n", true},
		{"trailing comment after a stdlib import", "import os  # the os module\n", true},

		{"numpy", "import numpy\n", false},
		{"numpy aliased", "import numpy as np\n", false},
		{"from pandas", "from pandas import DataFrame\n", false},
		{"stdlib then numpy in one statement", "import os,numpy\n", false},
		{"numpy after a semicolon", "import os; import numpy\n", false},
		{"numpy indented in try", "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n", false},
		{"numpy after try colon", "try: import numpy\nexcept ImportError: pass\n", false},
		{"submodule of a third party package", "import matplotlib.pyplot as plt\n", false},
		{"numpy on a continuation line", "import os, \\\n    numpy\n", false},
		{"relative import", "from . import x\n", false},
		{"relative module", "from .util import helper\n", false},
		{"parent relative", "from .. import x\n", false},
		{"the project's own module", "import main\n", false},
		{"__import__", "m = __import__('json')\n", false},
		{"builtins.__import__", "import builtins\nm = builtins.__import__('json')\n", false},
		{"importlib", "import importlib\nm = importlib.import_module('json')\n", false},
		{"from importlib", "from importlib import import_module\n", false},
		{"exec", "exec('import numpy')\n", false},
		{"eval", "x = eval('1 + 1')\n", false},
		{"compile", "c = compile('1', 'x', 'eval')\n", false},
		{"runpy", "import runpy\nrunpy.run_module('json')\n", false},
		{"pkgutil", "import pkgutil\n", false},
		{"pip", "import pip\n", false},
		{"import with nothing after", "import\n", false},
		{"dangling alias", "import os as\n", false},
		{"dangling comma", "import os,\n", false},
		{"trailing dot", "import os.\n", false},
		{"double dot", "import os..path\n", false},
		{"non-ASCII module", "import café\n", false},
		// Strings are not told from code: the word import in one reads as
		// an import statement, and only one that parses as a standard
		// library import passes.
		{"string naming numpy", "s = 'import numpy'\n", false},
		{"string naming os", "s = 'import os'\n", false},
		{"docstring line naming numpy", "'''\nimport numpy\n'''\n", false},
		{"docstring line naming os", "'''\nimport os\n'''\n", true},
		// A trailing comment is read as code, so is a dynamic name in a
		// comment or string.
		{"trailing comment naming numpy", "x = 1  # import numpy later\n", false},
		{"eval in a comment", "print(1)  # no eval() here\n", false},
		{"pip in a string", "print('pip')\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := StdlibOnly([]byte(tt.code)); got != tt.lean {
				t.Errorf("StdlibOnly(%q) = %v, want %v", tt.code, got, tt.lean)
			}
		})
	}
}

func TestLean(t *testing.T) {
	code := []byte("import os\nprint(os.sep)\n")
	plain := Argv("/usr/bin/python3", Options{Entrypoint: "main.py", EvalLastExpr: true})
	for _, tt := range []struct {
		name string
		argv []string
		file string
		lean bool
	}{
		{"the entry point alone", plain, "main.py", true},
		{"the entry point, spelled with ./", plain, "./main.py", true},
		{"a file that is not the entry point", plain, "other.py", false},
		{"a DataFrame loaded by pandas", Argv("/usr/bin/python3", Options{DataFrames: map[string]string{"df": "d.csv"}}), "main.py", false},
		{"not the driver", []string{"/usr/bin/python3", "-c", "print(1)"}, "main.py", false},
		{"the driver under a shell (pre-commands)", append([]string{"/bin/sh", "-c", "exec \"$@\"", "x"}, plain...), "main.py", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Lean(tt.argv, tt.file, code); got != tt.lean {
				t.Errorf("Lean = %v, want %v", got, tt.lean)
			}
		})
	}
	if Lean(plain, "main.py", []byte("import numpy\n")) {
		t.Error("Lean accepted code importing numpy")
	}
}

// TestStdlibListIsTheStandardLibrary: the embedded list knows the modules
// users import and none of the usual third-party packages.
func TestStdlibListIsTheStandardLibrary(t *testing.T) {
	set := stdlibModules()
	for _, name := range []string{"os", "sys", "json", "re", "math", "collections", "asyncio", "tomllib", "__future__", "dataclasses", "typing"} {
		if !set[name] {
			t.Errorf("%s is not in the standard library list", name)
		}
	}
	for _, name := range []string{"numpy", "pandas", "matplotlib", "requests", "pip", "setuptools", "main", ""} {
		if set[name] {
			t.Errorf("%q is in the standard library list", name)
		}
	}
	if len(set) < 300 {
		t.Errorf("the list has %d modules", len(set))
	}
}

func BenchmarkStdlibOnly(b *testing.B) {
	code := []byte(strings.Repeat("import os, sys\nfrom collections import deque\nx = [i * i for i in range(10)]\nprint(sum(x))\n", 50))
	for b.Loop() {
		if !StdlibOnly(code) {
			b.Fatal("not lean")
		}
	}
}
