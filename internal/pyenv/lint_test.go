package pyenv

import (
	"context"
	"encoding/json"
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
	src := "import os, sys\ndef f(x = 1):\n    return undefined_name\n"
	diags, err := l.Lint(context.Background(), []File{{Path: "main.py", Data: []byte(src)}, {Path: "data.txt", Data: []byte("x")}}, LintRules{})
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
	for _, want := range []string{"F401", "E401", "F821", "ANN201", "D103"} {
		if _, ok := codes[want]; !ok {
			t.Errorf("no %s among %v", want, slices.Collect(mapKeys(codes)))
		}
	}
	for _, ignored := range []string{"D100", "CPY001"} {
		if _, ok := codes[ignored]; ok {
			t.Errorf("%s is in the default ignore list but was reported", ignored)
		}
	}
	f821 := codes["F821"]
	if f821.Location != (Position{Line: 3, Column: 12}) || f821.EndLocation != (Position{Line: 3, Column: 26}) ||
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
