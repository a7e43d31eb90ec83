package api

import (
	"context"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// uploadInput is a multipart exec request, read whole (up to the body cap)
// and decoded by readUpload; huma only bounds its size and read time.
type uploadInput struct {
	ContentType string `header:"Content-Type"`
	RawBody     []byte `contentType:"multipart/form-data"`
}

type resultOutput struct{ Body ExecutionResult }

// AsyncAccepted answers POST /api/v1/exec/async.
type AsyncAccepted struct {
	ExecutionID string `json:"execution_id" example:"exe_3f1c2b9e-8d4a-4f7e-9c1a-2b3c4d5e6f70"`
}

type asyncOutput struct{ Body AsyncAccepted }

// uploadSchema documents the multipart body of the exec endpoints.
func uploadSchema(hapi huma.API) *huma.RequestBody {
	meta := hapi.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Metadata](), true, "Metadata")
	return &huma.RequestBody{
		Required: true,
		Content: map[string]*huma.MediaType{"multipart/form-data": {
			Schema: &huma.Schema{
				Type:     huma.TypeObject,
				Required: []string{"tar", "metadata"},
				Properties: map[string]*huma.Schema{
					"tar":      {Type: huma.TypeString, Format: "binary", Description: "Tar (USTAR, PAX or GNU) of the project, uncompressed or gzip-compressed"},
					"metadata": meta,
				},
			},
			Encoding: map[string]*huma.Encoding{
				"tar":      {ContentType: "application/x-tar, application/gzip, application/octet-stream"},
				"metadata": {ContentType: "application/json, text/plain"},
			},
		}},
	}
}

func (s *Server) registerExec(hapi huma.API) {
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge,
		http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}

	o := op(hapi, "exec-sync", http.MethodPost, "/api/v1/exec/sync", "Run a project and wait for the result", errs...)
	o.Tags = []string{"executions"}
	o.Description = "A failed execution is still HTTP 200 with status \"failed\"; a Python exception is \"completed\" with a non-zero exit_code."
	s.uploadLimits(&o, hapi)
	huma.Register(hapi, o, func(ctx context.Context, in *uploadInput) (*resultOutput, error) {
		req, err := s.decodeUpload(ctx, in)
		if err != nil {
			return nil, err
		}
		e, err := s.eng.RunSync(ctx, req)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &resultOutput{Body: newResult(e)}, nil
	})

	o = op(hapi, "exec-async", http.MethodPost, "/api/v1/exec/async", "Queue a project and return its execution id", errs...)
	o.Tags = []string{"executions"}
	o.DefaultStatus = http.StatusAccepted
	s.uploadLimits(&o, hapi)
	huma.Register(hapi, o, func(ctx context.Context, in *uploadInput) (*asyncOutput, error) {
		req, err := s.decodeUpload(ctx, in)
		if err != nil {
			return nil, err
		}
		id, err := s.eng.Submit(ctx, req)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &asyncOutput{Body: AsyncAccepted{ExecutionID: id}}, nil
	})
}

// uploadLimits sets the body cap and documentation of an upload operation.
func (s *Server) uploadLimits(o *huma.Operation, hapi huma.API) {
	o.RequestBody = uploadSchema(hapi)
	// huma refuses a body of exactly MaxBodyBytes, so allow one more byte:
	// the cap itself is inclusive.
	o.MaxBodyBytes = s.limits.MaxBodyBytes + 1
	o.BodyReadTimeout = bodyReadTimeout
	// The schema documents the body; readUpload checks it.
	o.SkipValidateBody = true
}

// decodeUpload turns a multipart request into an engine.Request.
func (s *Server) decodeUpload(ctx context.Context, in *uploadInput) (engine.Request, error) {
	up, err := readUpload(in.ContentType, in.RawBody, s.limits.Archive)
	if err != nil {
		return engine.Request{}, err
	}
	// A python image names the interpreter; any other image, or a tag
	// without MAJOR.MINOR, means the server's default.
	version, _ := pyenv.VersionFromImage(up.meta.DockerImage)
	return s.limits.request(ctx, up.files, runSpec{
		Entrypoint:    up.meta.Entrypoint,
		Stdin:         up.meta.Stdin,
		StdinEncoding: up.meta.StdinEncoding,
		Env:           up.meta.EnvVars,
		Args:          up.meta.ScriptArgs,
		Requirements:  up.meta.RequirementsTxt,
		PreCommands:   up.meta.PreCommands,
		PythonVersion: version,
		Lint:          up.meta.Lint,
		Config:        up.meta.Config,
		Rich:          richOptions{up.meta.DataFrames, up.meta.Collect, up.meta.FigureFormat, up.meta.MaxRows},
	})
}
