package api

import (
	"context"
	"fmt"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// maxEvalCodeBytes caps the code of one eval request, summed over files.
const maxEvalCodeBytes = 100 << 10

// EvalFile is one file of an eval request.
type EvalFile struct {
	Name     string `json:"name" example:"helper.py"`
	Content  string `json:"content,omitempty" doc:"The file's content; missing or empty makes an empty file"`
	Encoding string `json:"encoding,omitempty" enum:"utf-8,base64" doc:"How content is written: utf-8 text (the default) or base64 of the raw bytes (binary data files)"`
}

// EvalRequest is the JSON body of POST /api/v1/eval. Unknown fields are
// ignored.
type EvalRequest struct {
	Code            string      `json:"code,omitempty" doc:"Python source, run as main.py" example:"print(1 + 1)"`
	Files           []EvalFile  `json:"files,omitempty" doc:"Project files; when present, code is ignored"`
	Entrypoint      string      `json:"entrypoint,omitempty" doc:"File to run; default files[0].name, or main.py"`
	Stdin           string      `json:"stdin,omitempty" doc:"Text given to the program on standard input, or with stdin_encoding base64 the base64 of its bytes"`
	StdinEncoding   string      `json:"stdin_encoding,omitempty" enum:"utf-8,base64" doc:"How stdin is written: utf-8 text (the default) or base64 of raw bytes (binary input)"`
	Config          *ExecConfig `json:"config,omitempty"`
	PythonVersion   string      `json:"python_version,omitempty" doc:"Interpreter version, e.g. 3.12; default the server's" example:"3.12"`
	EvalLastExpr    bool        `json:"eval_last_expr,omitempty" doc:"Return the repr of the last expression in result"`
	RequirementsTxt string      `json:"requirements_txt,omitempty" doc:"requirements.txt content; \"-\" turns off import auto-detection"`
	Lint            LintMode    `json:"lint,omitempty"`

	DataFrames   map[string]string `json:"dataframes,omitempty" doc:"Variables to load with pandas before the code runs: name → one of the uploaded files (CSV, TSV, JSON, Parquet, Excel)" example:"{\"df\":\"data.csv\"}"`
	Collect      []string          `json:"collect,omitempty" doc:"Glob patterns (path.Match, relative to the workspace) of the files to return as artifacts; default every file the run created or changed" example:"[\"out/*.csv\",\"*.png\"]"`
	FigureFormat string            `json:"figure_format,omitempty" enum:"png,svg" doc:"Format of matplotlib figures in outputs; default png"`
	MaxRows      int               `json:"max_rows,omitempty" minimum:"0" doc:"DataFrame rows kept in outputs (the rest is cut and flagged); 0 means the server default"`
}

// msgNoCode answers an eval or lint body with neither code nor files, in
// python-executor's words.
const msgNoCode = "either 'code' or 'files' must be provided"

// evalInput is the eval body, read whole and decoded by decodeJSON so that
// malformed JSON and wrong types get precise 400s and unknown fields pass.
type evalInput struct {
	RawBody []byte `contentType:"application/json"`
}

func (s *Server) registerEval(hapi huma.API) {
	o := op(hapi, "eval", http.MethodPost, "/api/v1/eval", "Run code sent as JSON and wait for the result",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge,
		http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable)
	o.Tags = []string{"executions"}
	o.MaxBodyBytes = s.limits.MaxBodyBytes + 1 // see uploadLimits
	o.BodyReadTimeout = bodyReadTimeout
	o.SkipValidateBody = true // decodeJSON checks the body, ignoring unknown fields
	huma.Register(hapi, o, func(ctx context.Context, in *evalInput) (*resultOutput, error) {
		var body EvalRequest
		if err := decodeJSON(in.RawBody, &body, "request body"); err != nil {
			return nil, err
		}
		req, err := s.evalRequest(ctx, &body)
		if err != nil {
			return nil, err
		}
		e, err := s.eng.RunSync(ctx, req)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &resultOutput{Body: newResult(e)}, nil
	})
	publishJSONBody(hapi, "/api/v1/eval", reflect.TypeFor[EvalRequest](), "EvalRequest")
}

// evalRequest turns an eval body into an engine.Request.
func (s *Server) evalRequest(ctx context.Context, body *EvalRequest) (engine.Request, error) {
	files, err := s.sourceFiles(body.Code, body.Files)
	if err != nil {
		return engine.Request{}, err
	}
	entry := body.Entrypoint
	if entry == "" {
		entry = files[0].Path
	}
	return s.limits.request(ctx, files, runSpec{
		Entrypoint:    entry,
		Stdin:         body.Stdin,
		StdinEncoding: body.StdinEncoding,
		Requirements:  body.RequirementsTxt,
		PythonVersion: body.PythonVersion,
		EvalLastExpr:  body.EvalLastExpr,
		Lint:          body.Lint,
		Config:        body.Config,
		Rich:          richOptions{body.DataFrames, body.Collect, body.FigureFormat, body.MaxRows},
	})
}

// sourceFiles are the files of an eval or lint body: files win over code
// (which becomes main.py), and the code, summed over the text files, is
// capped at 100 KiB; base64 files are decoded and fall under the archive
// caps instead.
func (s *Server) sourceFiles(code string, sources []EvalFile) ([]engine.File, error) {
	if len(sources) == 0 {
		if code == "" {
			return nil, errorf(http.StatusBadRequest, "%s", msgNoCode)
		}
		sources = []EvalFile{{Name: defaultEntrypoint, Content: code}}
	}
	if len(sources) > s.limits.Archive.MaxFiles {
		return nil, errorf(http.StatusRequestEntityTooLarge, "request has more than %d files", s.limits.Archive.MaxFiles)
	}
	set := newFileSet()
	files := make([]engine.File, len(sources))
	var text, data int64 // text bytes (the code cap) and decoded binary bytes (the archive caps)
	for i, f := range sources {
		what := quoted(fmt.Sprintf("files[%d].name", i), f.Name)
		name, err := cleanPath(f.Name, what)
		if err != nil {
			return nil, err
		}
		if err := set.add(name, what); err != nil {
			return nil, err
		}
		content, err := fileContent(f, fmt.Sprintf("files[%d]", i))
		if err != nil {
			return nil, err
		}
		if f.Encoding == encodingBase64 {
			if err := s.limits.Archive.checkBinary(name, int64(len(content)), &data); err != nil {
				return nil, err
			}
		} else {
			text += int64(len(content))
		}
		files[i] = engine.File{Path: name, Data: content, Mode: 0o644}
	}
	if text > maxEvalCodeBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "total code size %d bytes exceeds limit of %d bytes", text, maxEvalCodeBytes)
	}
	return files, nil
}
