package mcpserver

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

func TestLintPython(t *testing.T) {
	unused := client.Diagnostic{Code: "F401", Message: "`os` imported but unused", Filename: "main.py",
		Location: client.Position{Line: 1, Column: 8}, EndLocation: client.Position{Line: 1, Column: 10},
		Fix: json.RawMessage(`{"applicability":"safe","message":"Remove unused import: ` + "`os`" + `","edits":[]}`)}
	syntax := client.Diagnostic{Message: "SyntaxError: Expected ')'", Location: client.Position{Line: 2, Column: 5},
		EndLocation: client.Position{Line: 2, Column: 6}, Fix: json.RawMessage("null")}
	tests := []struct {
		name      string
		diags     []client.Diagnostic
		lintErr   error
		args      map[string]any
		wantReq   client.LintRequest
		wantError bool
		wantText  []string
		wantOut   *LintPythonOutput
	}{
		{
			name:     "clean code",
			diags:    []client.Diagnostic{},
			args:     map[string]any{"code": "print(1)\n"},
			wantReq:  client.LintRequest{Code: "print(1)\n"},
			wantText: []string{"No problems found."},
			wantOut:  &LintPythonOutput{Count: 0, Diagnostics: []LintDiagnostic{}},
		},
		{
			name:    "problems are listed compiler-style with their fixes",
			diags:   []client.Diagnostic{unused, syntax},
			args:    map[string]any{"code": "import os\nprint(\n"},
			wantReq: client.LintRequest{Code: "import os\nprint(\n"},
			wantText: []string{"2 problems found:\n", "main.py:1:8: F401 `os` imported but unused (fix: Remove unused import: `os`)\n",
				"main.py:2:5: error SyntaxError: Expected ')'\n"},
			wantOut: &LintPythonOutput{Count: 2, Diagnostics: []LintDiagnostic{
				{File: "main.py", Line: 1, Column: 8, EndLine: 1, EndColumn: 10, Code: "F401", Message: "`os` imported but unused", Fix: "Remove unused import: `os`"},
				{File: "main.py", Line: 2, Column: 5, EndLine: 2, EndColumn: 6, Message: "SyntaxError: Expected ')'"},
			}},
		},
		{
			name:  "files and rule selection are passed on",
			diags: []client.Diagnostic{},
			args: map[string]any{"code": "import helper", "files": []map[string]string{{"path": "helper.py", "content": "X = 1"}},
				"select": []string{"E", "F"}, "ignore": []string{"E501"}},
			wantReq: client.LintRequest{Files: []client.CodeFile{{Name: "main.py", Content: "import helper"}, {Name: "helper.py", Content: "X = 1"}},
				Select: []string{"E", "F"}, Ignore: []string{"E501"}},
			wantText: []string{"No problems found."},
		},
		{
			name:      "a lint the server cannot do is an error result with its message",
			lintErr:   &client.APIError{StatusCode: 503, Message: "lint is not available on this server"},
			args:      map[string]any{"code": "x"},
			wantReq:   client.LintRequest{Code: "x"},
			wantError: true,
			wantText:  []string{"linting: lint is not available on this server (HTTP 503)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.diags, f.lintErr = tt.diags, tt.lintErr
			cs, _ := connect(t, f, Options{})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lint_python", Arguments: tt.args})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			if res.IsError != tt.wantError {
				t.Errorf("isError = %v, want %v; text %q", res.IsError, tt.wantError, text(res))
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q does not contain %q", text(res), w)
				}
			}
			f.amu.Lock()
			if f.lintReq == nil || !reflect.DeepEqual(*f.lintReq, tt.wantReq) {
				t.Errorf("lint request %+v, want %+v", f.lintReq, tt.wantReq)
			}
			f.amu.Unlock()
			if tt.wantOut != nil {
				var got LintPythonOutput
				if raw, err := jsonRoundTrip(res.StructuredContent, &got); err != nil {
					t.Fatalf("structured content %s: %v", raw, err)
				}
				if !reflect.DeepEqual(got, *tt.wantOut) {
					t.Errorf("structured content\n got %+v\nwant %+v", got, *tt.wantOut)
				}
			}
		})
	}
}

func TestLintPythonRefusesADuplicateMain(t *testing.T) {
	f := newFake()
	cs, _ := connect(t, f, Options{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lint_python", Arguments: map[string]any{
		"code": "x", "files": []map[string]string{{"path": "main.py", "content": "y"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), `"main.py" is given twice`) || f.lintReq != nil {
		t.Fatalf("isError %v, text %q, request sent %v", res.IsError, text(res), f.lintReq != nil)
	}
}

// TestLintToolFollowsAvailability: a server made while lint is unavailable
// does not offer lint_python; the function-calling definitions agree.
func TestLintToolFollowsAvailability(t *testing.T) {
	for _, available := range []bool{true, false} {
		cs, _ := connect(t, newFake(), Options{Lint: func() bool { return available }})
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		offered := false
		for _, tool := range res.Tools {
			offered = offered || tool.Name == "lint_python"
		}
		defined := false
		for _, d := range AvailableDefinitions(available, false) {
			defined = defined || d.Name == "lint_python"
		}
		if offered != available || defined != available {
			t.Errorf("lint available %v: lint_python offered %v, defined %v", available, offered, defined)
		}
		if len(res.Tools) != len(AvailableDefinitions(available, false)) {
			t.Errorf("lint available %v: %d tools offered, %d defined", available, len(res.Tools), len(AvailableDefinitions(available, false)))
		}
	}
}
