package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// LintMode is the "lint" field of eval requests and exec metadata: false
// or absent (no lint), true (diagnostics alongside the result) or "only"
// (diagnostics instead of a run: the code never runs).
type LintMode string

// UnmarshalJSON accepts true, false, null and "only".
func (m *LintMode) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "false", "null":
		*m = LintMode(engine.LintOff)
	case "true":
		*m = LintMode(engine.LintWith)
	case `"only"`:
		*m = LintMode(engine.LintOnly)
	default:
		return fmt.Errorf(`field "lint" must be true, false or "only", got %.40s`, b)
	}
	return nil
}

// Schema documents the two JSON types the field takes.
func (LintMode) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: `true: ruff's diagnostics in "lint" alongside the result; "only": diagnostics without running the code`,
		OneOf:       []*huma.Schema{{Type: huma.TypeBoolean}, {Type: huma.TypeString, Enum: []any{"only"}}},
	}
}

// LintPosition is a 1-based place in a file.
type LintPosition struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// LintDiagnostic is one problem ruff found.
type LintDiagnostic struct {
	Code        string          `json:"code" example:"F401"`
	Message     string          `json:"message" example:"os imported but unused"`
	Location    LintPosition    `json:"location"`
	EndLocation LintPosition    `json:"end_location"`
	Fix         json.RawMessage `json:"fix" doc:"ruff's suggested fix ({applicability, message, edits}), or null"`
	Filename    string          `json:"filename" doc:"File of the project, relative to its root" example:"main.py"`
}

func newDiagnostics(ds []pyenv.Diagnostic) []LintDiagnostic {
	out := make([]LintDiagnostic, len(ds))
	for i, d := range ds {
		out[i] = LintDiagnostic{Code: d.Code, Message: d.Message, Fix: d.Fix, Filename: d.Filename,
			Location:    LintPosition{Line: d.Location.Line, Column: d.Location.Column},
			EndLocation: LintPosition{Line: d.EndLocation.Line, Column: d.EndLocation.Column}}
		if len(out[i].Fix) == 0 {
			out[i].Fix = json.RawMessage("null")
		}
	}
	return out
}

// LintRequest is the JSON body of POST /api/v1/lint. Unknown fields are
// ignored.
type LintRequest struct {
	Code    string     `json:"code,omitempty" doc:"Python source, checked as main.py" example:"import os\nprint(undefined)"`
	Files   []EvalFile `json:"files,omitempty" doc:"Project files; when present, code is ignored"`
	Profile string     `json:"profile,omitempty" enum:"default,strict" doc:"default (or absent): the operator's rules, out of the box likely bugs only (pyflakes F, pycodestyle E7 and E9, bugbear B, without E731 and E741); strict: every rule except COM812, CPY, D100, D203, D213, FBT and RUF029"`
	Select  []string   `json:"select,omitempty" doc:"ruff rule selectors replacing the profile's selection" example:"[\"E\",\"F\"]"`
	Ignore  []string   `json:"ignore,omitempty" doc:"ruff rule selectors replacing the profile's ignore list" example:"[\"E501\"]"`
}

type lintOutput struct{ Body []LintDiagnostic }

func (s *Server) registerLint(hapi huma.API) {
	o := op(hapi, "lint", http.MethodPost, "/api/v1/lint", "Check code with ruff without running it",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge,
		http.StatusInternalServerError, http.StatusServiceUnavailable)
	o.Tags = []string{"lint"}
	o.Description = "Runs ruff in a jail without network. The default profile reports likely bugs, not style: pyflakes (F), " +
		"pycodestyle's E7 and E9 errors and bugbear (B), without E731 and E741 (the operator may change it); profile " +
		"strict selects every rule except COM812, CPY, D100, D203, D213, FBT and RUF029; select and ignore replace the " +
		"profile's rules for one request. The response is the list of diagnostics, empty when the code is clean. " +
		"While the server is still fetching ruff at first start the answer is 503 with Retry-After."
	o.MaxBodyBytes = s.limits.MaxBodyBytes + 1 // see uploadLimits
	o.BodyReadTimeout = bodyReadTimeout
	o.SkipValidateBody = true
	huma.Register(hapi, o, func(ctx context.Context, in *evalInput) (*lintOutput, error) {
		var body LintRequest
		if err := decodeJSON(in.RawBody, &body, "request body"); err != nil {
			return nil, err
		}
		files, err := s.sourceFiles(body.Code, body.Files)
		if err != nil {
			return nil, err
		}
		diags, err := s.eng.Lint(ctx, files, pyenv.LintRules{Profile: body.Profile, Select: body.Select, Ignore: body.Ignore})
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &lintOutput{Body: newDiagnostics(diags)}, nil
	})
	publishJSONBody(hapi, "/api/v1/lint", reflect.TypeFor[LintRequest](), "LintRequest")
}
