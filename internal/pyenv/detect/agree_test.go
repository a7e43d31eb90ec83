package detect

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// TestScanAgreesWithTheInterpreter runs the jailed detector (the
// interpreter's own ast) and the scan over a corpus, on every interpreter
// of this host: wherever the scan decides a file the interpreter parses,
// its imports (with their optional flags) and calls are the detector's.
// The corpus is testdata/corpus (written for these tests), a sample of the
// interpreter's own standard library, and, when $PYEXEC_SEEDS names a
// directory, the Python examples of the seed documents in it.
func TestScanAgreesWithTheInterpreter(t *testing.T) {
	run := pyenvtest.Jail(t)
	corpus := readTree(t, "testdata/corpus", "")
	seeds := seedExamples(t, os.Getenv("PYEXEC_SEEDS"))
	for _, v := range []string{"3.8", "3.9", "3.10", "3.11", "3.12", "3.13"} {
		t.Run(v, func(t *testing.T) {
			in := pyenvtest.Python(t, v)
			minor, ok := python3Minor(in.Full)
			if !ok {
				t.Fatalf("version %q", in.Full)
			}
			a := NewAnalyzer(run, AnalyzerConfig{})
			files := slices.Concat(corpus, seeds, stdlibSample(t, in, 60))
			var decided, parsed int
			for _, batch := range batches(files) {
				out, err := a.detect(context.Background(), in, batch)
				if err != nil {
					t.Fatal(err)
				}
				d, p := compare(t, out, batch, minor)
				decided, parsed = decided+d, parsed+p
			}
			t.Logf("Python %s: the scan decided %d of the %d files the interpreter parsed", in.Full, decided, parsed)
			if decided < parsed*9/10 {
				t.Errorf("the scan decided only %d of %d files", decided, parsed)
			}
		})
	}
}

// compare checks the scan of each file of batch against the detector's
// answer; it counts the files the interpreter parsed and those the scan
// decided among them. A corpus file the scan does not decide fails the
// test unless its name says it should not (unsure_*.py).
func compare(t *testing.T, out *detectorOutput, batch []File, minor int) (decided, parsed int) {
	t.Helper()
	failed := map[string]bool{}
	for _, e := range out.Errors {
		failed[e.File] = true
	}
	for _, f := range out.Deep {
		failed[f] = true
	}
	truncated := len(out.Calls) >= maxCalls // a file of more than 2000 calls, alone
	for _, file := range batch {
		p := path.Clean(file.Path)
		if failed[p] {
			continue
		}
		parsed++
		var got found
		unsure, tooComplex := scanFile(p, file.Data, minor, &got)
		if unsure != "" || tooComplex != "" {
			if strings.HasPrefix(p, "corpus/") && !strings.HasPrefix(path.Base(p), "unsure_") {
				t.Errorf("%s: the scan did not decide: %s%s", p, unsure, tooComplex)
			}
			continue
		}
		decided++
		want := found{imports: only(out.Imports, p, func(i Import) string { return i.File }),
			calls: only(out.Calls, p, func(c Call) string { return c.File })}
		ranks := map[string]int{p: 0}
		sortFound(want.imports, want.calls, ranks)
		sortFound(got.imports, got.calls, ranks)
		if !slices.Equal(got.imports, want.imports) {
			t.Errorf("%s: imports\nscan     %v\ndetector %v", p, got.imports, want.imports)
		}
		if got.callsUnsure == "" && !truncated && !slices.Equal(got.calls, want.calls) {
			t.Errorf("%s: calls\nscan     %v\ndetector %v", p, got.calls, want.calls)
		}
	}
	return decided, parsed
}

func only[T any](all []T, file string, of func(T) string) []T {
	var out []T
	for _, x := range all {
		if of(x) == file {
			out = append(out, x)
		}
	}
	return out
}

// batches splits files into detector runs whose calls stay under the
// detector's bound (every call has a '('), and whose size fits a
// workspace.
func batches(files []File) [][]File {
	var out [][]File
	var cur []File
	calls, size := 0, 0
	for _, f := range files {
		n := bytes.Count(f.Data, []byte("("))
		if len(cur) > 0 && (calls+n > maxCalls || size+len(f.Data) > 8<<20 || len(cur) >= 200) {
			out = append(out, cur)
			cur, calls, size = nil, 0, 0
		}
		cur = append(cur, f)
		calls, size = calls+n, size+len(f.Data)
	}
	return append(out, cur)
}

// readTree reads the .py files under dir, named prefix + their path
// relative to the parent of dir ("corpus/pkg/x.py").
func readTree(t testing.TB, dir, prefix string) []File {
	t.Helper()
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".py") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(dir), p)
		files = append(files, File{Path: prefix + filepath.ToSlash(rel), Data: b})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// stdlibSample takes every nth .py file of in's standard library, so that
// about want files are read.
func stdlibSample(t *testing.T, in interp.Interpreter, want int) []File {
	t.Helper()
	out, err := exec.Command(in.Path, "-I", "-S", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		t.Fatalf("asking %s for its standard library: %v", in.Path, err)
	}
	all := readTree(t, strings.TrimSpace(string(out)), "stdlib/")
	step := max(1, len(all)/want)
	var files []File
	for i := 0; i < len(all); i += step {
		if len(all[i].Data) <= 256<<10 {
			files = append(files, all[i])
		}
	}
	return files
}

// seedExamples cuts the seed documents in dir into runs of lines that look
// like Python (from a line starting with import, from, def, class or @ to
// the next line of prose) and names each seeds/DOC-N.py. The detector
// says which of them parse; only those are compared.
func seedExamples(t *testing.T, dir string) []File {
	t.Helper()
	if dir == "" {
		return nil
	}
	docs, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("PYEXEC_SEEDS=%s holds no seed documents (%v)", dir, err)
	}
	var files []File
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var cur []string
		flush := func() {
			if len(cur) > 0 {
				name := fmt.Sprintf("seeds/%s-%d.py", strings.TrimSuffix(filepath.Base(doc), ".txt"), len(files))
				files = append(files, File{Path: name, Data: []byte(strings.Join(cur, "\n") + "\n")})
			}
			cur = nil
		}
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case startsCode(line):
				cur = append(cur, line)
			case len(cur) > 0 && (strings.TrimSpace(line) == "" || line[0] == ' ' || line[0] == '\t' || line[0] == ')' ||
				line[0] == ']' || line[0] == '}' || strings.ContainsAny(line[:1], "#@") || looksLikeStatement(line)):
				cur = append(cur, line)
			default:
				flush()
			}
		}
		flush()
	}
	return files
}

func startsCode(line string) bool {
	for _, p := range []string{"import ", "from ", "def ", "class ", "@", "async def "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// looksLikeStatement: `name = ...`, `name(...)`, `name.attr...` or a
// keyword statement at the start of a line.
func looksLikeStatement(line string) bool {
	for _, kw := range []string{"if ", "for ", "while ", "try:", "except", "finally:", "else:", "elif ", "with ", "return", "print(", "raise "} {
		if strings.HasPrefix(line, kw) {
			return true
		}
	}
	i := 0
	for i < len(line) && (isIdentByte(line[i]) || line[i] == '.') {
		i++
	}
	rest := strings.TrimLeft(line[i:], " ")
	return i > 0 && (strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, "["))
}
