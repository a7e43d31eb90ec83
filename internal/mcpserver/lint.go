package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// LintBackend is what lint_python needs: the API's lint, which runs ruff
// in a jail without running the code. *client.Client implements it.
type LintBackend interface {
	// Lint checks a project and returns ruff's diagnostics.
	Lint(ctx context.Context, req *client.LintRequest) ([]client.Diagnostic, error)
}

// LintPythonInput are the arguments of lint_python.
type LintPythonInput struct {
	Code    string      `json:"code" jsonschema:"Python source code to check, as the file main.py."`
	Files   []InputFile `json:"files,omitempty" jsonschema:"Extra files checked with main.py, such as modules it imports."`
	Profile string      `json:"profile,omitempty" jsonschema:"default (likely bugs only: undefined names, unused imports, bugbear) or strict (nearly every ruff rule, style and docstrings included)."`
	Select  []string    `json:"select,omitempty" jsonschema:"ruff rule selectors to check instead of the profile's selection, e.g. [\"E\", \"F\", \"B\"]."`
	Ignore  []string    `json:"ignore,omitempty" jsonschema:"ruff rule codes to ignore instead of the server's list, e.g. [\"E501\"]."`
}

// LintPythonOutput is the structured result of lint_python.
type LintPythonOutput struct {
	Count       int              `json:"count" jsonschema:"Number of problems found; 0 when the code is clean."`
	Diagnostics []LintDiagnostic `json:"diagnostics" jsonschema:"The problems, in file and line order."`
}

// LintDiagnostic is one problem ruff found, flattened for a model.
type LintDiagnostic struct {
	File      string `json:"file" jsonschema:"File the problem is in, e.g. main.py."`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Code      string `json:"code,omitempty" jsonschema:"ruff rule code, e.g. F401; empty for a syntax error."`
	Message   string `json:"message"`
	Fix       string `json:"fix,omitempty" jsonschema:"ruff's suggested fix, when it has one."`
}

// lintToolName is the name of the lint tool, which a server without lint
// does not offer.
const lintToolName = "lint_python"

// lintPythonTool is lint_python's definition.
func lintPythonTool() *mcp.Tool {
	in := schemaFor[LintPythonInput]()
	for _, p := range []string{"files", "select", "ignore"} {
		in.Properties[p].Types, in.Properties[p].Type = nil, "array"
	}
	in.Properties["profile"].Enum = []any{"default", "strict"}
	return &mcp.Tool{
		Name:  lintToolName,
		Title: "Lint Python",
		Description: "Check Python code with ruff without running it and list the problems found: syntax errors, " +
			"undefined names, unused imports and variables, likely bugs. Use it to review code before running it or " +
			"when a run fails for a reason that is not obvious. Each problem has its file, line, column, rule code " +
			"and message, and the fix ruff suggests when it has one.",
		InputSchema:  in,
		OutputSchema: schemaFor[LintPythonOutput](),
		Annotations: &mcp.ToolAnnotations{
			Title:          "Lint Python",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  ptr(false),
		},
	}
}

// request turns the arguments into the API's lint request.
func (in *LintPythonInput) request() (*client.LintRequest, error) {
	req := &client.LintRequest{Profile: in.Profile, Select: in.Select, Ignore: in.Ignore}
	if len(in.Files) == 0 {
		req.Code = in.Code
		return req, nil
	}
	req.Files = []client.CodeFile{{Name: entrypoint, Content: in.Code}}
	for i, f := range in.Files {
		if f.Path == entrypoint {
			return nil, fmt.Errorf("files[%d]: %q is given twice (the code argument is %s)", i, f.Path, entrypoint)
		}
		req.Files = append(req.Files, client.CodeFile{Name: f.Path, Content: f.Content})
	}
	return req, nil
}

// lintPython checks the code. Problems in the code are the tool's normal
// result; only a lint that could not run (no ruff on the server, a bad
// rule selector) is an error.
func (h *handlers) lintPython(ctx context.Context, _ *mcp.CallToolRequest, in LintPythonInput) (*mcp.CallToolResult, LintPythonOutput, error) {
	req, err := in.request()
	if err != nil {
		return nil, LintPythonOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	diags, err := h.backend.Lint(ctx, req)
	if err != nil {
		return nil, LintPythonOutput{}, fmt.Errorf("linting: %w", err)
	}
	out := LintPythonOutput{Count: len(diags), Diagnostics: make([]LintDiagnostic, len(diags))}
	for i, d := range diags {
		out.Diagnostics[i] = newLintDiagnostic(d)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: renderLint(out.Diagnostics)}}}, out, nil
}

func newLintDiagnostic(d client.Diagnostic) LintDiagnostic {
	file := d.Filename
	if file == "" {
		file = entrypoint
	}
	return LintDiagnostic{
		File: file, Line: d.Location.Line, Column: d.Location.Column,
		EndLine: d.EndLocation.Line, EndColumn: d.EndLocation.Column,
		Code: d.Code, Message: d.Message, Fix: fixMessage(d.Fix),
	}
}

// fixMessage is the description of ruff's fix object, "" when there is
// none; a fix without a description is still worth mentioning.
func fixMessage(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var fix struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &fix); err != nil || fix.Message == "" {
		return "available"
	}
	return fix.Message
}

// renderLint is the text a model reads: one compiler-style line per
// problem, or a sentence saying there are none.
func renderLint(diags []LintDiagnostic) string {
	if len(diags) == 0 {
		return "No problems found.\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem%s found:\n", len(diags), plural(len(diags)))
	for _, d := range diags {
		code := d.Code
		if code == "" {
			code = "error"
		}
		fmt.Fprintf(&b, "%s:%d:%d: %s %s", d.File, d.Line, d.Column, code, d.Message)
		if d.Fix != "" {
			fmt.Fprintf(&b, " (fix: %s)", d.Fix)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
