package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// RichOptions are pyexec's rich-output and file options, shared by
// SimpleExecRequest and Metadata. Zero values mean the server's defaults.
type RichOptions struct {
	// DataFrames loads files with pandas before the code runs: variable
	// name → one of the uploaded files (CSV, TSV, JSON, Parquet, Excel).
	DataFrames map[string]string `json:"dataframes,omitempty"`
	// Collect selects the files returned as artifacts by glob pattern
	// (path.Match, relative to the workspace); empty means every file the
	// run created or changed.
	Collect []string `json:"collect,omitempty"`
	// FigureFormat is "png" (the default) or "svg" for matplotlib figures.
	FigureFormat string `json:"figure_format,omitempty"`
	// MaxRows caps the DataFrame rows kept in outputs.
	MaxRows int `json:"max_rows,omitempty"`
}

// Output kinds (Output.Type).
const (
	// OutputDisplay is a display(obj) call or a matplotlib figure.
	OutputDisplay = "display"
	// OutputResult is the value of the last expression.
	OutputResult = "result"
)

// Output is one rich output, a Jupyter-style MIME bundle: Data maps a MIME
// type to its content, a JSON string for text types and for base64 images
// (image/png, image/jpeg), any JSON value for application/json.
type Output struct {
	Type     string                     `json:"type"`
	Data     map[string]json.RawMessage `json:"data"`
	Metadata json.RawMessage            `json:"metadata,omitempty"`
}

// Text returns the string content of mime ("text/plain", "text/html",
// "image/svg+xml"...) and whether the bundle has it as a string.
func (o Output) Text(mime string) (string, bool) {
	raw, ok := o.Data[mime]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// Image returns the best image in the bundle, decoded: its MIME type and
// bytes; ok is false when there is none.
func (o Output) Image() (mime string, data []byte, ok bool) {
	// Best first; PNG and JPEG are base64, SVG is text.
	imageTypes := [...]struct {
		mime   string
		base64 bool
	}{{"image/png", true}, {"image/jpeg", true}, {"image/svg+xml", false}}
	for _, it := range imageTypes {
		s, found := o.Text(it.mime)
		if !found {
			continue
		}
		if !it.base64 {
			return it.mime, []byte(s), true
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err == nil {
			return it.mime, b, true
		}
	}
	return "", nil, false
}

// Output decodes the rich output of an EventDisplay event.
func (e Event) Output() (Output, error) {
	if e.Type != EventDisplay {
		return Output{}, fmt.Errorf("event %d is %s, not %s", e.Seq, e.Type, EventDisplay)
	}
	var o Output
	if err := json.Unmarshal([]byte(e.Data), &o); err != nil {
		return Output{}, fmt.Errorf("decoding display event %d: %w", e.Seq, err)
	}
	return o, nil
}

// FileInfo describes one file an execution produced.
type FileInfo struct {
	// Path is workspace-relative and slash-separated, e.g. "out/report.csv".
	Path string `json:"path"`
	// Size is the length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the content.
	SHA256 string `json:"sha256"`
	// MIME is the file's media type, e.g. "text/csv".
	MIME string `json:"mime"`
	// Content is the base64 of a small image, inlined in the result; empty
	// otherwise (use DownloadFile).
	Content string `json:"content,omitempty"`
}

// EncodingBase64 is CodeFile.Encoding for binary content.
const EncodingBase64 = "base64"

// BinaryFile returns a CodeFile carrying data byte for byte (base64 on the
// wire), for data files that are not UTF-8 text.
func BinaryFile(name string, data []byte) CodeFile {
	return CodeFile{Name: name, Content: base64.StdEncoding.EncodeToString(data), Encoding: EncodingBase64}
}

// ListFiles returns the files an execution produced (without inlined
// content). An unknown execution is a *APIError with StatusCode 404.
func (c *Client) ListFiles(ctx context.Context, executionID string) ([]FileInfo, error) {
	var res struct {
		Files []FileInfo `json:"files"`
	}
	if err := c.call(ctx, http.MethodGet, executionPath(executionID)+"/files", nil, "", 0, &res); err != nil {
		return nil, err
	}
	return res.Files, nil
}

// DownloadFile opens one file an execution produced, by its listed path;
// the caller reads and closes it. An unknown execution or file is a
// *APIError with StatusCode 404 ("execution not found", "file not found").
// The client's timeout bounds the whole download, until Close.
func (c *Client) DownloadFile(ctx context.Context, executionID, path string) (io.ReadCloser, error) {
	return c.open(ctx, filePath(executionID, path))
}

// download ends the request's context when the body is closed.
type download struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (d *download) Close() error {
	err := d.ReadCloser.Close()
	d.cancel()
	return err
}

// filePath is the resource path of one file of an execution, each path
// segment escaped.
func filePath(executionID, path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return executionPath(executionID) + "/files/" + strings.Join(segs, "/")
}
