package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// LintMode asks an execution for ruff's diagnostics (SimpleExecRequest.Lint,
// Metadata.Lint). The zero value asks for none.
type LintMode string

// Lint modes.
const (
	// LintOff asks for no diagnostics (the default).
	LintOff LintMode = ""
	// LintWith returns the diagnostics in ExecutionResult.Lint alongside
	// the run.
	LintWith LintMode = "true"
	// LintOnly returns the diagnostics without running the code.
	LintOnly LintMode = "only"
)

// MarshalJSON writes the wire form: true, "only" or false.
func (m LintMode) MarshalJSON() ([]byte, error) {
	switch m {
	case LintOff:
		return []byte("false"), nil
	case LintWith:
		return []byte("true"), nil
	case LintOnly:
		return []byte(`"only"`), nil
	}
	return nil, fmt.Errorf("lint mode %q is not one of \"\", \"true\" and \"only\"", string(m))
}

// Position is a 1-based place in a file.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Diagnostic is one problem ruff found.
type Diagnostic struct {
	// Code is ruff's rule code, e.g. "F401".
	Code    string `json:"code"`
	Message string `json:"message"`
	// Location and EndLocation delimit the problem.
	Location    Position `json:"location"`
	EndLocation Position `json:"end_location"`
	// Fix is ruff's suggested fix as it sent it, or JSON null.
	Fix json.RawMessage `json:"fix"`
	// Filename is the file, relative to the project.
	Filename string `json:"filename,omitempty"`
}

// LintRequest is the body of Lint.
type LintRequest struct {
	// Code is checked as main.py; ignored when Files is set.
	Code  string     `json:"code,omitempty"`
	Files []CodeFile `json:"files,omitempty"`
	// Profile is "" or "default" (the server's rules: likely bugs only,
	// unless the operator changed them) or "strict" (nearly every rule).
	Profile string `json:"profile,omitempty"`
	// Select and Ignore replace the profile's rule selection when set.
	Select []string `json:"select,omitempty"`
	Ignore []string `json:"ignore,omitempty"`
}

// Lint checks code with the server's ruff without running it and returns
// the diagnostics (empty when the code is clean).
func (c *Client) Lint(ctx context.Context, req *LintRequest) ([]Diagnostic, error) {
	if req == nil {
		req = &LintRequest{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding lint request: %w", err)
	}
	var out []Diagnostic
	if err := c.call(ctx, http.MethodPost, "/api/v1/lint", body, "application/json", 0, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []Diagnostic{}
	}
	return out, nil
}
