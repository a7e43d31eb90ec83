package api

import (
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/pyexec/pyexec/internal/engine"
)

// richOptions are the rich-output and file options that eval requests and
// exec metadata share (pyexec additions; absent means the defaults).
type richOptions struct {
	DataFrames   map[string]string
	Collect      []string
	FigureFormat string
	MaxRows      int
}

// apply copies the options into req; the engine validates them.
func (o richOptions) apply(req *engine.Request) {
	req.DataFrames = o.DataFrames
	req.Collect = o.Collect
	req.FigureFormat = o.FigureFormat
	req.MaxRows = o.MaxRows
}

// Output is one rich output of an execution, a Jupyter-style MIME bundle.
type Output struct {
	Type     string          `json:"type" enum:"display,result" doc:"display: display(obj) or a matplotlib figure; result: the value of the last expression"`
	Data     map[string]any  `json:"data" doc:"MIME type → content: a string for text types (text/plain, text/html, image/svg+xml...), base64 for image/png and image/jpeg, any JSON value for application/json" example:"{\"text/plain\":\"<Figure size 640x480 with 1 Axes>\",\"image/png\":\"iVBORw0KGgo...\"}"`
	Metadata json.RawMessage `json:"metadata,omitempty" doc:"Per-type details the object gave with its reprs (Jupyter's metadata)"`
}

// FileInfo describes one file an execution produced, downloadable at
// /api/v1/executions/{id}/files/{path}.
type FileInfo struct {
	Path    string `json:"path" doc:"Workspace-relative, slash-separated" example:"out/report.csv"`
	Size    int64  `json:"size" doc:"Bytes"`
	SHA256  string `json:"sha256" doc:"Hex SHA-256 of the content; the download's ETag"`
	MIME    string `json:"mime" example:"text/csv"`
	Content string `json:"content,omitempty" doc:"Base64 of the content, for small images only"`
}

// newOutputs and newFiles encode the engine's rich outputs and files.
func newOutputs(in []engine.Output) []Output {
	if len(in) == 0 {
		return nil
	}
	out := make([]Output, len(in))
	for i, o := range in {
		out[i] = Output{Type: o.Type, Data: engine.FastData(o.Data), Metadata: o.Metadata}
	}
	return out
}

func newFiles(in []engine.FileInfo) []FileInfo {
	if len(in) == 0 {
		return nil
	}
	out := make([]FileInfo, len(in))
	for i, f := range in {
		out[i] = FileInfo{Path: f.Path, Size: f.Size, SHA256: f.SHA256, MIME: f.MIME, Content: f.Content}
	}
	return out
}

// File content encodings of EvalFile.Encoding.
const (
	encodingText   = "utf-8"
	encodingBase64 = "base64"
)

// fileContent decodes the content of an eval file: text as is, base64 to
// raw bytes. what names the file in messages.
func fileContent(f EvalFile, what string) ([]byte, error) {
	switch f.Encoding {
	case "", encodingText:
		return []byte(f.Content), nil
	case encodingBase64:
		data, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%s: content is not valid base64: %v", what, err)
		}
		return data, nil
	}
	return nil, errorf(http.StatusBadRequest, "%s: unsupported encoding %q; use \"utf-8\" (the default) or \"base64\"", what, f.Encoding)
}

// checkBinary applies the archive caps to a decoded base64 eval file of
// size bytes (text files fall under the code cap instead); total sums the
// binary files so far.
func (l archiveLimits) checkBinary(name string, size int64, total *int64) error {
	if size > l.MaxFileBytes {
		return errorf(http.StatusRequestEntityTooLarge, "%s is %d bytes; the limit is %d bytes per file", quoted("file", name), size, l.MaxFileBytes)
	}
	if *total += size; *total > l.MaxTotalBytes {
		return errorf(http.StatusRequestEntityTooLarge, "binary files exceed limit of %d bytes in total", l.MaxTotalBytes)
	}
	return nil
}
