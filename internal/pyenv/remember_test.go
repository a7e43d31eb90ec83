package pyenv

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// countingJail counts detector runs and fails each: a test that sees no
// run was served from a remembered analysis.
type countingJail struct{ runs *int }

func (j countingJail) Run(context.Context, sandbox.Spec, sandbox.OutputFunc) (sandbox.Result, error) {
	*j.runs++
	return sandbox.Result{}, errors.New("no jail in this test")
}

// TestResolveUsesARememberedAnalysis: an analysis that Resolve returned,
// stored as JSON (with a queued request) and remembered by another
// resolver (the node that runs the job, or the same node after a
// restart), spares that resolver the detector for the same project;
// the operator's lists still apply, and another project or interpreter
// is not served from it.
func TestResolveUsesARememberedAnalysis(t *testing.T) {
	ctx := context.Background()
	in := Interpreter{Full: "3.12.1", Path: "/usr/bin/python3.12"}
	// Latin-1 source: the scan leaves it to the detector.
	files := []File{{Path: "main.py", Data: []byte("# coding: latin-1\nimport numpy\nimport yaml\ns = '\xe9'\n")}}
	imports := []Import{{Module: "numpy", File: "main.py", Line: 2}, {Module: "yaml", File: "main.py", Line: 3}}
	stored, err := json.Marshal(&Analysis{Imports: imports, AllImports: imports})
	if err != nil {
		t.Fatal(err)
	}
	var back Analysis
	if err := json.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	runs := 0
	r, err := NewResolver(NewAnalyzer(countingJail{&runs}, AnalyzerConfig{}), ResolverConfig{Deny: []string{"pyyaml"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Remember(in, files, "main.py", &back)
	needs, err := r.Resolve(ctx, in, files, "main.py", "")
	if err != nil || runs != 0 {
		t.Fatalf("resolving a remembered project: %v, %d detector runs", err, runs)
	}
	var names []string
	for _, q := range needs.Set {
		names = append(names, q.Name)
	}
	if !slices.Equal(names, []string{"numpy"}) {
		t.Errorf("needs %v, want numpy (pyyaml is denied)", names)
	}
	if len(needs.Warnings) != 1 || !strings.Contains(needs.Warnings[0], "pyyaml") {
		t.Errorf("warnings %q, want one about the denied pyyaml", needs.Warnings)
	}
	if needs.Analysis == nil || len(needs.Analysis.Imports) != 2 {
		t.Errorf("Resolve returned the analysis %+v, want the remembered one", needs.Analysis)
	}

	other := []File{{Path: "main.py", Data: []byte("# coding: latin-1\nimport numpy\ns = '\xe9'\n")}}
	if _, err := r.Resolve(ctx, in, other, "main.py", ""); err == nil || runs != 1 {
		t.Errorf("another project: %v after %d detector runs, want the detector's error after 1", err, runs)
	}
	py311 := Interpreter{Full: "3.11.9", Path: "/usr/bin/python3.11"}
	if _, err := r.Resolve(ctx, py311, files, "main.py", ""); err == nil || runs != 2 {
		t.Errorf("another interpreter: %v after %d detector runs, want the detector's error after 2", err, runs)
	}
}
