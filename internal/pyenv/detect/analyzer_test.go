package detect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// countingJail counts the detector runs that reach the jail.
type countingJail struct {
	JailRunner
	runs atomic.Int64
}

func (c *countingJail) Run(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc) (sandbox.Result, error) {
	c.runs.Add(1)
	return c.JailRunner.Run(ctx, spec, out)
}

// TestNewCodeCostsNoJail: code the server has never seen, eight requests
// at a time, is read without a jail; the interpreter is asked once, for
// its standard library. Code the scan leaves to the interpreter costs one
// detector run, once.
func TestNewCodeCostsNoJail(t *testing.T) {
	jail := &countingJail{JailRunner: pyenvtest.Jail(t)}
	in := pyenvtest.Python(t, "")
	a := NewAnalyzer(jail, AnalyzerConfig{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				code := fmt.Sprintf("import json, yaml\nfrom requests import get\nprint(json.dumps(%d))\n", w*100+i)
				an, err := a.Analyze(ctx, in, []File{{Path: "main.py", Data: []byte(code)}}, "main.py", true)
				if err != nil {
					errs <- err
					return
				}
				if len(an.Imports) != 2 || an.Imports[0].Module != "yaml" || an.Imports[1].Module != "requests" {
					errs <- fmt.Errorf("third-party imports %+v, want yaml and requests", an.Imports)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := jail.runs.Load(); n != 1 {
		t.Errorf("200 new snippets ran the detector %d times, want once (the standard library)", n)
	}
	latin1 := []File{{Path: "main.py", Data: []byte("# coding: latin-1\nimport yaml\ns = '\xe9'\n")}}
	for i := 0; i < 2; i++ {
		an, err := a.Analyze(ctx, in, latin1, "main.py", false)
		if err != nil || len(an.Imports) != 1 || an.Imports[0].Module != "yaml" {
			t.Fatalf("latin-1 source: %+v, %v", an, err)
		}
	}
	if n := jail.runs.Load(); n != 2 {
		t.Errorf("a latin-1 source, twice, ran the detector %d more times, want once", n-1)
	}
}

// TestDetectorHostileSources: sources the scan leaves to the interpreter
// (here: for their latin-1 coding cookie) and that hurt its ast end in an
// answer or in ErrTooComplex, never in a failed request.
func TestDetectorHostileSources(t *testing.T) {
	a := NewAnalyzer(pyenvtest.Jail(t), AnalyzerConfig{})
	in := pyenvtest.Python(t, "")
	cookie := "# coding: latin-1\ns = '\xe9'\nimport yaml\n"
	cases := []struct {
		name, src  string
		tooComplex bool
	}{
		{"brackets nested deeper than the parser allows", cookie + "x = " + strings.Repeat("(", 1000) + strings.Repeat(")", 1000) + "\n", false},
		{"unary operators a hundred thousand deep", cookie + "x = " + strings.Repeat("- ", 100_000) + "1\n", false},
		{"a sum too long for ast to walk", cookie + "x = " + strings.Repeat("1 + ", 800) + "1\n", true},
		{"blocks nested deeper than CPython allows", cookie + deepBlocks(150), false},
		{"NUL bytes", "import yaml\x00\n", false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			an, err := a.Analyze(context.Background(), in, []File{{Path: "main.py", Data: []byte(tt.src)}}, "main.py", true)
			switch {
			case tt.tooComplex && !errors.Is(err, ErrTooComplex):
				t.Errorf("error %v, want ErrTooComplex", err)
			case !tt.tooComplex && err != nil:
				t.Errorf("error %v, want an answer", err)
			case !tt.tooComplex && len(an.SyntaxErrors) != 1:
				t.Errorf("syntax errors %+v, want the file's", an.SyntaxErrors)
			}
		})
	}
}
