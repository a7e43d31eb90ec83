package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// FilesBackend is what list_files and read_file need: the artifacts of an
// execution. *client.Client implements it.
type FilesBackend interface {
	// ListFiles returns the files an execution produced.
	ListFiles(ctx context.Context, executionID string) ([]client.FileInfo, error)
	// DownloadFile opens one of them by its listed path.
	DownloadFile(ctx context.Context, executionID, path string) (io.ReadCloser, error)
}

// Caps of read_file: what one call returns at most.
const (
	// defaultReadBytes is how much of a text file read_file returns when
	// the call does not say.
	defaultReadBytes = 64 << 10
	// maxReadBytes caps max_bytes.
	maxReadBytes = 1 << 20
	// maxImageBytes is the largest image returned as image content.
	maxImageBytes = 4 << 20
	// maxBlobBytes is the largest other binary file returned as an
	// embedded resource.
	maxBlobBytes = 1 << 20
	// maxListedInError is how many paths an unknown-path error names.
	maxListedInError = 20
)

// Ways read_file returns a file (ReadFileOutput.Returned).
const (
	returnedText     = "text"
	returnedImage    = "image"
	returnedResource = "resource"
	returnedNone     = "none"
)

// ExecutionFileInput names an execution, for list_files.
type ExecutionFileInput struct {
	ExecutionID string `json:"execution_id" jsonschema:"ID of the execution, as run_python returned it (exe_...)."`
}

// FileEntry describes one file an execution produced.
type FileEntry struct {
	Path   string `json:"path" jsonschema:"Path in the working directory, e.g. out/report.csv."`
	Size   int64  `json:"size" jsonschema:"Size in bytes."`
	MIME   string `json:"mime" jsonschema:"Media type, e.g. text/csv or image/png."`
	SHA256 string `json:"sha256,omitempty"`
}

// ListFilesOutput is the structured result of list_files.
type ListFilesOutput struct {
	ExecutionID string      `json:"execution_id"`
	Files       []FileEntry `json:"files"`
}

// ReadFileInput are the arguments of read_file.
type ReadFileInput struct {
	ExecutionID string `json:"execution_id" jsonschema:"ID of the execution, as run_python returned it (exe_...)."`
	Path        string `json:"path" jsonschema:"Path of the file as list_files or run_python listed it, e.g. out/report.csv."`
	Offset      int64  `json:"offset,omitempty" jsonschema:"For text files: the byte to start at, to read on where an earlier call stopped. Default 0."`
	MaxBytes    int    `json:"max_bytes,omitempty" jsonschema:"For text files: the most bytes to return. Default 65536."`
}

// ReadFileOutput is the structured result of read_file.
type ReadFileOutput struct {
	ExecutionID string `json:"execution_id"`
	Path        string `json:"path"`
	Size        int64  `json:"size" jsonschema:"Size of the whole file in bytes."`
	MIME        string `json:"mime"`
	Returned    string `json:"returned" jsonschema:"How the content came back: text, image (image content), resource (an embedded base64 blob) or none (too large, or binary)."`
	Offset      int64  `json:"offset,omitempty" jsonschema:"First byte returned, for text."`
	Bytes       int    `json:"bytes" jsonschema:"Number of bytes returned."`
	Truncated   bool   `json:"truncated,omitempty" jsonschema:"More of the file follows what was returned: call again with offset = offset + bytes."`
}

// listFilesTool is list_files' definition.
func listFilesTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "list_files",
		Title: "List output files",
		Description: "List the files a run_python execution wrote or changed in its working directory (paths, " +
			"sizes and media types). run_python already lists them in its result; use this for an earlier execution, " +
			"then read_file to see one.",
		InputSchema:  schemaFor[ExecutionFileInput](),
		OutputSchema: schemaFor[ListFilesOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "List output files", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

// readFileTool is read_file's definition.
func readFileTool() *mcp.Tool {
	in := schemaFor[ReadFileInput]()
	in.Properties["offset"].Minimum = ptr(0.0)
	in.Properties["max_bytes"].Minimum = ptr(1.0)
	in.Properties["max_bytes"].Maximum = ptr(float64(maxReadBytes))
	return &mcp.Tool{
		Name:  "read_file",
		Title: "Read an output file",
		Description: "Read a file that a run_python execution wrote, such as a CSV, a report or a saved plot. " +
			"Text files come back as text (64 KiB at a time by default; use offset to read on), images (PNG, " +
			"JPEG, GIF, WebP) as images you can see, other small binary files as an embedded base64 resource.",
		InputSchema:  in,
		OutputSchema: schemaFor[ReadFileOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Read an output file", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

// listFiles lists an execution's files.
func (h *handlers) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in ExecutionFileInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	if in.ExecutionID == "" {
		return nil, ListFilesOutput{}, errors.New("execution_id is required")
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	files, err := h.backend.ListFiles(ctx, in.ExecutionID)
	if err != nil {
		return nil, ListFilesOutput{}, fmt.Errorf("listing the files of %s: %w", in.ExecutionID, err)
	}
	out := ListFilesOutput{ExecutionID: in.ExecutionID, Files: newFileEntries(files)}
	if out.Files == nil {
		out.Files = []FileEntry{}
	}
	var b strings.Builder
	if len(files) == 0 {
		fmt.Fprintf(&b, "Execution %s produced no files.\n", in.ExecutionID)
	} else {
		fmt.Fprintf(&b, "%d file%s of execution %s:\n", len(files), plural(len(files)), in.ExecutionID)
		writeFileLines(&b, out.Files)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}

// readFile returns one file of an execution in the form a model can use
// best, within the caps.
func (h *handlers) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileOutput, error) {
	if in.ExecutionID == "" || in.Path == "" {
		return nil, ReadFileOutput{}, errors.New("execution_id and path are required")
	}
	if in.Offset < 0 || in.MaxBytes < 0 || in.MaxBytes > maxReadBytes {
		return nil, ReadFileOutput{}, fmt.Errorf("offset must be at least 0 and max_bytes between 1 and %d", maxReadBytes)
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	f, err := h.find(ctx, in.ExecutionID, in.Path)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	out := ReadFileOutput{ExecutionID: in.ExecutionID, Path: f.Path, Size: f.Size, MIME: f.MIME, Returned: returnedNone}
	kind := kindOf(f.MIME)
	if limit := kind.limit(); limit > 0 && f.Size > limit {
		msg := fmt.Sprintf("%s is %s (%d bytes), more than read_file returns (%d bytes); it stays available for download from "+
			"the API at /api/v1/executions/%s/files/%s.\n", f.Path, f.MIME, f.Size, limit, in.ExecutionID, f.Path)
		return textResult(msg), out, nil
	}
	want := int64(in.MaxBytes)
	if want == 0 {
		want = defaultReadBytes
	}
	if kind == kindText {
		data, err := h.download(ctx, in.ExecutionID, f.Path, in.Offset, want+1)
		if err != nil {
			return nil, ReadFileOutput{}, err
		}
		return readText(f, in, data, want, out)
	}
	// Images and other binary files come whole (their size is capped).
	data, err := h.download(ctx, in.ExecutionID, f.Path, 0, f.Size)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	if kind == kindBinary && looksLikeText(data) {
		// An unknown type whose bytes are text: show it as text.
		window := data[min(in.Offset, int64(len(data))):]
		return readText(f, in, window[:min(int64(len(window)), want+1)], want, out)
	}
	switch kind {
	case kindImage:
		out.Returned, out.Bytes = returnedImage, len(data)
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: fmt.Sprintf("%s (%s, %d bytes):\n", f.Path, f.MIME, len(data))},
			&mcp.ImageContent{Data: data, MIMEType: baseMIME(f.MIME)},
		}}, out, nil
	default:
		out.Returned, out.Bytes = returnedResource, len(data)
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: fmt.Sprintf("%s is binary (%s, %d bytes); its bytes follow as a base64 resource.\n", f.Path, f.MIME, len(data))},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: fileURI(in.ExecutionID, f.Path), MIMEType: baseMIME(f.MIME), Blob: data}},
		}}, out, nil
	}
}

// readText returns a window of a text file: data holds up to want+1
// bytes from in.Offset, the extra byte telling whether more follows.
func readText(f client.FileInfo, in ReadFileInput, data []byte, want int64, out ReadFileOutput) (*mcp.CallToolResult, ReadFileOutput, error) {
	out.Returned, out.Offset = returnedText, in.Offset
	if int64(len(data)) > want {
		data, out.Truncated = trimToRune(data[:want]), true
	}
	out.Bytes = len(data)
	content := []mcp.Content{&mcp.TextContent{Text: string(data)}}
	if out.Truncated {
		next := in.Offset + int64(len(data))
		content = append(content, &mcp.TextContent{Text: fmt.Sprintf(
			"\n[%s: bytes %d-%d of %d shown; call read_file with offset %d to read on]\n", f.Path, in.Offset, next, f.Size, next)})
	} else if len(data) == 0 {
		content[0] = &mcp.TextContent{Text: fmt.Sprintf("[%s: nothing at offset %d; the file has %d bytes]\n", f.Path, in.Offset, f.Size)}
	}
	return &mcp.CallToolResult{Content: content}, out, nil
}

// find looks path up in the execution's listing, so that an unknown path
// gets an answer naming the paths there are.
func (h *handlers) find(ctx context.Context, id, path string) (client.FileInfo, error) {
	files, err := h.backend.ListFiles(ctx, id)
	if err != nil {
		return client.FileInfo{}, fmt.Errorf("listing the files of %s: %w", id, err)
	}
	path = strings.TrimPrefix(path, "./")
	i := slices.IndexFunc(files, func(f client.FileInfo) bool { return f.Path == path })
	if i >= 0 {
		return files[i], nil
	}
	if len(files) == 0 {
		return client.FileInfo{}, fmt.Errorf("execution %s produced no files", id)
	}
	names := make([]string, 0, min(len(files), maxListedInError))
	for _, f := range files[:min(len(files), maxListedInError)] {
		names = append(names, f.Path)
	}
	more := ""
	if len(files) > maxListedInError {
		more = fmt.Sprintf(" and %d more", len(files)-maxListedInError)
	}
	return client.FileInfo{}, fmt.Errorf("execution %s has no file %q; its files are: %s%s", id, path, strings.Join(names, ", "), more)
}

// download reads at most n bytes of a file from offset on.
func (h *handlers) download(ctx context.Context, id, path string, offset, n int64) ([]byte, error) {
	rc, err := h.backend.DownloadFile(ctx, id, path)
	if err != nil {
		return nil, fmt.Errorf("downloading %s of %s: %w", path, id, err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading %s of %s: %w", path, id, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, n))
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", path, id, err)
	}
	return data, nil
}

func newFileEntries(files []client.FileInfo) []FileEntry {
	var out []FileEntry
	for _, f := range files {
		out = append(out, FileEntry{Path: f.Path, Size: f.Size, MIME: f.MIME, SHA256: f.SHA256})
	}
	return out
}

// writeFileLines lists files one per line, as the text of list_files and
// run_python shows them.
func writeFileLines(b *strings.Builder, files []FileEntry) {
	for _, f := range files {
		fmt.Fprintf(b, "%s (%d bytes, %s)\n", f.Path, f.Size, f.MIME)
	}
}

// fileURI names a file of an execution in an embedded resource.
func fileURI(id, path string) string {
	return "pyexec://executions/" + id + "/files/" + path
}

// textResult is a result with one text block.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
