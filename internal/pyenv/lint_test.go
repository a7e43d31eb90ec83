package pyenv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	run := jail(t)
	_, ruff := pyenvTools(t)
	l, err := NewLinter(run, LintConfig{Ruff: ruff})
	if err != nil {
		t.Fatal(err)
	}
	src := "import os, sys\ndef f(x = []):\n    if x == None:\n        print(x)\n    display(x)\n    return undefined_name\n"
	files := []File{{Path: "main.py", Data: []byte(src)}, {Path: "data.txt", Data: []byte("x")}}
	tests := []struct {
		name          string
		rules         LintRules
		want, notWant []string
	}{
		// The default profile: bugs, not style.
		{"default", LintRules{}, []string{"F401", "F821", "B006", "E711"}, []string{"E401", "E251", "D103", "ANN201", "T201"}},
		{"default by name", LintRules{Profile: ProfileDefault}, []string{"F401", "B006"}, []string{"D103"}},
		{"strict", LintRules{Profile: ProfileStrict}, []string{"F401", "E401", "F821", "ANN201", "D103", "T201"}, []string{"D100", "CPY001"}},
		{"select replaces the profile's", LintRules{Profile: ProfileStrict, Select: []string{"F"}}, []string{"F401"}, []string{"D103", "B006"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags, err := l.Lint(context.Background(), files, tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			codes := map[string]Diagnostic{}
			for _, d := range diags {
				codes[d.Code] = d
				if d.Filename != "main.py" {
					t.Errorf("diagnostic %s in %q, want main.py", d.Code, d.Filename)
				}
			}
			for _, want := range tt.want {
				if _, ok := codes[want]; !ok {
					t.Errorf("no %s among %v", want, slices.Sorted(mapKeys(codes)))
				}
			}
			for _, no := range tt.notWant {
				if _, ok := codes[no]; ok {
					t.Errorf("%s was reported, want it off in this profile", no)
				}
			}
		})
	}

	diags, err := l.Lint(context.Background(), files, LintRules{})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]Diagnostic{}
	for _, d := range diags {
		codes[d.Code] = d
		// display() is pyexec's, there in every run: not undefined.
		if d.Code == "F821" && strings.Contains(d.Message, "display") {
			t.Errorf("pyexec's display() flagged: %+v", d)
		}
	}
	f821 := codes["F821"]
	if f821.Location != (Position{Line: 6, Column: 12}) || f821.EndLocation != (Position{Line: 6, Column: 26}) ||
		!strings.Contains(f821.Message, "undefined_name") {
		t.Errorf("F821 = %+v", f821)
	}
	b, err := json.Marshal(codes["F401"])
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "message", "location", "end_location", "fix"} {
		if _, ok := wire[k]; !ok {
			t.Errorf("the JSON of a diagnostic lacks %q: %s", k, b)
		}
	}
	if fix, _ := wire["fix"].(map[string]any); fix == nil {
		t.Errorf("F401 has no fix: %s", b)
	}
	if _, err := l.Lint(context.Background(), files, LintRules{Profile: "pedantic"}); !errors.Is(err, ErrBadProfile) {
		t.Errorf("an unknown profile: err = %v, want ErrBadProfile", err)
	}
}

// TestLintRuffUnderTmp: ruff may live where the jail has its own
// directories (a virtualenv under /tmp): lint still works.
func TestLintRuffUnderTmp(t *testing.T) {
	run := jail(t)
	_, ruff := pyenvTools(t)
	venv, err := os.MkdirTemp("/tmp", "pyexec-ruff-venv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(venv) })
	if err := os.Chmod(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ruff)
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(venv, "bin", "ruff")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, b, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := NewLinter(run, LintConfig{Ruff: moved})
	if err != nil {
		t.Fatal(err)
	}
	diags, err := l.Lint(context.Background(), []File{{Path: "main.py", Data: []byte("import os\n")}}, LintRules{})
	if err != nil {
		t.Fatalf("lint with ruff at %s: %v", moved, err)
	}
	if len(diags) != 1 || diags[0].Code != "F401" {
		t.Errorf("diagnostics = %+v, want one F401", diags)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
