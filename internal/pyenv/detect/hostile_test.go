package detect

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestScanHostileSources: sources made to hurt cost the server memory in
// proportion to their size at most, and end in an answer, in "the
// interpreter decides" (the detector, in a jail, then reads them) or in
// ErrTooComplex (a 400) — never in a crash or an unbounded wait.
func TestScanHostileSources(t *testing.T) {
	const size = 10 << 20
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	cases := []struct {
		name    string
		src     string
		outcome string // "answer", "unsure" (the detector decides) or "too complex"
	}{
		{"10 MB of import lines", fill("import a\n"), "too complex"},
		{"10 MB of distinct import names on one line", "import " + strings.TrimSuffix(fill("ab, "), ", ") + "\n", "too complex"},
		{"10 MB of from-import names", "from m import (" + fill("ab, ") + ")\n", "too complex"},
		{"a 10 MB single line", "x = [" + fill("1, ") + "]\n", "answer"},
		{"a 10 MB string", "s = '" + fill("x") + "'\n", "answer"},
		{"a 10 MB dotted name", "a" + fill(".b") + "()\n", "answer"},
		{"10 MB of calls", fill("f(1)\n"), "answer"},
		{"10 MB of decorators", fill("@d()\n") + "def f(): pass\n", "unsure"},
		{"brackets nested 5 million deep", fill("(") + fill(")") + "\n", "unsure"},
		{"blocks nested deeper than CPython allows", deepBlocks(150), "unsure"},
		{"an unterminated triple-quoted string", "import a\ns = '''" + fill("x\n"), "unsure"},
		{"NUL bytes", fill("import a\x00\n"), "unsure"},
		{"a UTF-16 file", "\xff\xfei\x00m\x00p\x00o\x00r\x00t\x00 \x00a\x00\n\x00", "unsure"},
		{"a coding cookie over latin-1 bytes", "# coding: latin-1\n" + fill("s = '\xe9'\n"), "unsure"},
		{"f-strings nested 10 000 deep", strings.Repeat("f'{", 10000) + "1" + strings.Repeat("}'", 10000) + "\n", "unsure"},
		{"an except clause of 10 MB", "try:\n    import a\nexcept (" + fill("E, ") + "):\n    pass\n", "unsure"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, unsure, err := scanProject([]File{{Path: "main.py", Data: []byte(tt.src)}}, 12)
			runtime.ReadMemStats(&after)
			got := "answer"
			switch {
			case errors.Is(err, ErrTooComplex):
				got = "too complex"
			case err != nil:
				t.Fatalf("error %v", err)
			case unsure != "":
				got = "unsure"
			}
			if got != tt.outcome {
				t.Errorf("outcome %s (%s %v), want %s", got, unsure, err, tt.outcome)
			}
			// The scan allocates no more than a few times the source.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(4*len(tt.src))+16<<20 {
				t.Errorf("the scan allocated %d MiB for %d MiB of source", alloc>>20, len(tt.src)>>20)
			}
		})
	}
}

func deepBlocks(n int) string {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat(" ", i) + "if x:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "import a\n")
	return b.String()
}

// FuzzScan: whatever the bytes, the scan ends, without a panic, in an
// answer, "the interpreter decides" or ErrTooComplex; an answer holds only
// imports and calls of the file, on lines it has.
func FuzzScan(f *testing.F) {
	for _, c := range readTree(f, "testdata/corpus", "") {
		f.Add(c.Data, 12)
		f.Add(c.Data, 8)
	}
	f.Add([]byte("f'{a:{b!r}}' f\"{'x'}\"\n@d\nclass C[T]: pass\n"), 12)
	f.Fuzz(func(t *testing.T, src []byte, minor int) {
		fs, unsure, err := scanProject([]File{{Path: "main.py", Data: src}}, 8+(minor&7))
		if err != nil && !errors.Is(err, ErrTooComplex) {
			t.Fatalf("error %v", err)
		}
		if err != nil || unsure != "" {
			return
		}
		lines := bytes.Count(src, []byte("\n")) + 1
		for _, im := range fs.imports {
			if im.File != "main.py" || im.Line < 1 || im.Line > lines {
				t.Fatalf("import %+v outside the file's %d lines", im, lines)
			}
		}
		for _, c := range fs.calls {
			if c.File != "main.py" || c.Line < 1 || c.Line > lines || c.Name == "" {
				t.Fatalf("call %+v outside the file's %d lines", c, lines)
			}
		}
	})
}
