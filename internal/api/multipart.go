package api

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/pyexec/pyexec/internal/engine"
)

// Metadata is the "metadata" part of exec/sync and exec/async. Unknown
// fields are ignored.
type Metadata struct {
	Entrypoint      string      `json:"entrypoint,omitempty" doc:"File to run; default main.py" example:"main.py"`
	DockerImage     string      `json:"docker_image,omitempty" doc:"python:<version>[-variant]; selects the interpreter version" example:"python:3.12-slim"`
	RequirementsTxt string      `json:"requirements_txt,omitempty" doc:"requirements.txt content to install before running; \"-\" turns off import auto-detection"`
	PreCommands     []string    `json:"pre_commands,omitempty" doc:"Shell commands run in order with /bin/sh -c in the sandbox, with the same limits, before the script; a failing one ends the execution"`
	Lint            LintMode    `json:"lint,omitempty"`
	Stdin           string      `json:"stdin,omitempty" doc:"Text given to the script on standard input, or with stdin_encoding base64 the base64 of its bytes"`
	StdinEncoding   string      `json:"stdin_encoding,omitempty" enum:"utf-8,base64" doc:"How stdin is written: utf-8 text (the default) or base64 of raw bytes (binary input)"`
	EnvVars         []string    `json:"env_vars,omitempty" doc:"KEY=value pairs" example:"[\"DEBUG=1\"]"`
	ScriptArgs      []string    `json:"script_args,omitempty"`
	Config          *ExecConfig `json:"config,omitempty"`

	DataFrames   map[string]string `json:"dataframes,omitempty" doc:"Variables to load with pandas before the code runs: name → one of the uploaded files (CSV, TSV, JSON, Parquet, Excel)" example:"{\"df\":\"data.csv\"}"`
	Collect      []string          `json:"collect,omitempty" doc:"Glob patterns (path.Match, relative to the workspace) of the files to return as artifacts; default every file the run created or changed" example:"[\"out/*.csv\",\"*.png\"]"`
	FigureFormat string            `json:"figure_format,omitempty" enum:"png,svg" doc:"Format of matplotlib figures in outputs; default png"`
	MaxRows      int               `json:"max_rows,omitempty" minimum:"0" doc:"DataFrame rows kept in outputs (the rest is cut and flagged); 0 means the server default"`
}

// msgMissingMetadata starts the 400 of an upload without metadata; the
// words are python-executor's.
const msgMissingMetadata = "missing metadata"

// upload is a decoded multipart request: the project files and the
// metadata.
type upload struct {
	files []engine.File
	meta  Metadata
}

// readUpload decodes a multipart/form-data body held in memory. The part
// "tar" is a tar (gzip-compressed or not); the part "metadata" is JSON,
// sent either as a plain form field or as an application/json part; both
// are the same to a multipart reader. Both parts are required, as
// python-executor required them (its clients always send metadata, "{}"
// at least). Other parts are ignored.
func readUpload(contentType string, body []byte, lim archiveLimits) (*upload, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return nil, errorf(http.StatusBadRequest, "expected a multipart/form-data body with a \"tar\" part and a \"metadata\" part, got Content-Type %q", contentType)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	up := &upload{}
	var haveTar, haveMeta bool
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "malformed multipart body: %v", err)
		}
		switch part.FormName() {
		case "tar":
			if haveTar {
				return nil, errorf(http.StatusBadRequest, "more than one \"tar\" part")
			}
			haveTar = true
			if up.files, err = readTar(part, lim); err != nil {
				return nil, err
			}
		case "metadata":
			if haveMeta {
				return nil, errorf(http.StatusBadRequest, "more than one \"metadata\" part")
			}
			haveMeta = true
			data, err := io.ReadAll(part)
			if err != nil {
				return nil, errorf(http.StatusBadRequest, "malformed multipart body: %v", err)
			}
			if len(bytes.TrimSpace(data)) == 0 {
				return nil, errorf(http.StatusBadRequest, "%s: the \"metadata\" part is empty", msgMissingMetadata)
			}
			if err := decodeJSON(data, &up.meta, "metadata"); err != nil {
				return nil, err
			}
		}
	}
	if !haveTar {
		return nil, errorf(http.StatusBadRequest, "missing \"tar\" part")
	}
	if !haveMeta {
		return nil, errorf(http.StatusBadRequest, "%s: send a \"metadata\" part holding a JSON object ({} for the defaults)", msgMissingMetadata)
	}
	return up, nil
}
