package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// WorkspaceBackend is what the workspace tools need; the Go client
// implements it. It acts as the caller's key, so a tool sees the
// workspaces the HTTP API shows that key and no other (another key's is
// "not found", as an unknown one). A Backend without it answers those
// tools with an error.
type WorkspaceBackend interface {
	ListWorkspaces(ctx context.Context) ([]client.Workspace, error)
	WorkspaceFiles(ctx context.Context, name, dir string, version int64) ([]client.WorkspaceFile, error)
	OpenWorkspaceFile(ctx context.Context, name, path string, version int64) (io.ReadCloser, error)
	WriteWorkspaceFile(ctx context.Context, name, path string, r io.Reader) (*client.WorkspaceCommit, error)
}

var _ WorkspaceBackend = (*client.Client)(nil)

var errNoWorkspaces = errors.New("this server's backend does not offer workspaces")

// maxListedEntries caps the entries list_workspace_files returns.
const maxListedEntries = 1000

// WorkspaceSummary is one workspace in list_workspaces.
type WorkspaceSummary struct {
	Name       string `json:"name"`
	Version    int64  `json:"version" jsonschema:"The current version; each change set makes the next."`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	QuotaBytes int64  `json:"quota_bytes"`
}

// ListWorkspacesInput has no arguments.
type ListWorkspacesInput struct{}

// ListWorkspacesOutput is list_workspaces' result.
type ListWorkspacesOutput struct {
	Workspaces []WorkspaceSummary `json:"workspaces"`
}

// WorkspaceFilesInput are the arguments of list_workspace_files.
type WorkspaceFilesInput struct {
	Workspace string `json:"workspace" jsonschema:"Name of the workspace, as list_workspaces shows it."`
	Dir       string `json:"dir,omitempty" jsonschema:"A folder of the workspace to list, e.g. data; default: all of it."`
}

// WorkspaceEntry is one entry of list_workspace_files.
type WorkspaceEntry struct {
	Path   string `json:"path" jsonschema:"Path in the workspace; runs see it below /workspace."`
	Type   string `json:"type" jsonschema:"file, dir or symlink."`
	Size   int64  `json:"size,omitempty"`
	Target string `json:"target,omitempty" jsonschema:"Where a symbolic link points."`
}

// WorkspaceFilesOutput is list_workspace_files' result.
type WorkspaceFilesOutput struct {
	Workspace string           `json:"workspace"`
	Entries   []WorkspaceEntry `json:"entries"`
	Omitted   int              `json:"omitted,omitempty" jsonschema:"Entries left out beyond the first 1000; list a folder to see them."`
}

// ReadWorkspaceFileInput are the arguments of read_workspace_file.
type ReadWorkspaceFileInput struct {
	Workspace string `json:"workspace" jsonschema:"Name of the workspace."`
	Path      string `json:"path" jsonschema:"Path of the file in the workspace, e.g. data/input.csv."`
	Offset    int64  `json:"offset,omitempty" jsonschema:"The byte to start at, to read on where an earlier call stopped. Default 0."`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"The most bytes to return. Default 65536."`
}

// ReadWorkspaceFileOutput is read_workspace_file's result.
type ReadWorkspaceFileOutput struct {
	Workspace string `json:"workspace"`
	Path      string `json:"path"`
	Returned  string `json:"returned" jsonschema:"text, or none for a binary file."`
	Offset    int64  `json:"offset,omitempty"`
	Bytes     int    `json:"bytes" jsonschema:"Number of bytes returned."`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"More of the file follows: call again with offset = offset + bytes."`
}

// WriteWorkspaceFileInput are the arguments of write_workspace_file.
type WriteWorkspaceFileInput struct {
	Workspace string `json:"workspace" jsonschema:"Name of the workspace."`
	Path      string `json:"path" jsonschema:"Path of the file in the workspace, e.g. src/app.py; missing folders are made."`
	Content   string `json:"content" jsonschema:"The file's text; it replaces the whole file."`
}

// WriteWorkspaceFileOutput is write_workspace_file's result.
type WriteWorkspaceFileOutput struct {
	Workspace string   `json:"workspace"`
	Version   int64    `json:"version" jsonschema:"The workspace's version after the write."`
	Changed   bool     `json:"changed" jsonschema:"False when the file already held this content."`
	Conflicts []string `json:"conflicts,omitempty" jsonschema:"Paths another writer changed meanwhile, and where this content was kept instead."`
}

func listWorkspacesTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "list_workspaces",
		Title: "List workspaces",
		Description: "List your workspaces: named file trees that outlive runs. A run_python call or a session " +
			"that passes workspace sees one at /workspace, and what it leaves there is kept for the next call.",
		InputSchema:  schemaFor[ListWorkspacesInput](),
		OutputSchema: schemaFor[ListWorkspacesOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "List workspaces", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

func listWorkspaceFilesTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         "list_workspace_files",
		Title:        "List the files of a workspace",
		Description:  "List the files, folders and links of a workspace (or of one folder of it), with their sizes.",
		InputSchema:  schemaFor[WorkspaceFilesInput](),
		OutputSchema: schemaFor[WorkspaceFilesOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "List the files of a workspace", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

func readWorkspaceFileTool() *mcp.Tool {
	in := schemaFor[ReadWorkspaceFileInput]()
	in.Properties["offset"].Minimum = ptr(0.0)
	in.Properties["max_bytes"].Minimum = ptr(1.0)
	in.Properties["max_bytes"].Maximum = ptr(float64(maxReadBytes))
	return &mcp.Tool{
		Name:  "read_workspace_file",
		Title: "Read a file of a workspace",
		Description: "Read a text file of a workspace, 64 KiB at a time by default (use offset to read on). " +
			"A binary file is not returned; read it from code with run_python and workspace.",
		InputSchema:  in,
		OutputSchema: schemaFor[ReadWorkspaceFileOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Read a file of a workspace", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

func writeWorkspaceFileTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "write_workspace_file",
		Title: "Write a file of a workspace",
		Description: "Write a text file into a workspace, replacing the file if it is there; the workspace gets a " +
			"new version (the one before stays restorable). Runs that pass workspace see it at /workspace/PATH.",
		InputSchema:  schemaFor[WriteWorkspaceFileInput](),
		OutputSchema: schemaFor[WriteWorkspaceFileOutput](),
		Annotations: &mcp.ToolAnnotations{Title: "Write a file of a workspace", DestructiveHint: ptr(true), IdempotentHint: true,
			OpenWorldHint: ptr(false)},
	}
}

func (h *handlers) workspaces() (WorkspaceBackend, error) {
	wb, ok := h.backend.(WorkspaceBackend)
	if !ok {
		return nil, errNoWorkspaces
	}
	return wb, nil
}

func (h *handlers) listWorkspaces(ctx context.Context, _ *mcp.CallToolRequest, _ ListWorkspacesInput) (*mcp.CallToolResult, ListWorkspacesOutput, error) {
	wb, err := h.workspaces()
	if err != nil {
		return nil, ListWorkspacesOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	list, err := wb.ListWorkspaces(ctx)
	if err != nil {
		return nil, ListWorkspacesOutput{}, fmt.Errorf("listing the workspaces: %w", err)
	}
	out := ListWorkspacesOutput{Workspaces: []WorkspaceSummary{}}
	var b strings.Builder
	if len(list) == 0 {
		b.WriteString("You have no workspaces.\n")
	}
	for _, w := range list {
		out.Workspaces = append(out.Workspaces, WorkspaceSummary{Name: w.Name, Version: w.Version, Files: w.Files, Bytes: w.Bytes, QuotaBytes: w.QuotaBytes})
		fmt.Fprintf(&b, "%s: version %d, %d files, %d bytes of %d\n", w.Name, w.Version, w.Files, w.Bytes, w.QuotaBytes)
	}
	return textResult(b.String()), out, nil
}

func (h *handlers) listWorkspaceFiles(ctx context.Context, _ *mcp.CallToolRequest, in WorkspaceFilesInput) (*mcp.CallToolResult, WorkspaceFilesOutput, error) {
	wb, err := h.workspaces()
	if err != nil {
		return nil, WorkspaceFilesOutput{}, err
	}
	if in.Workspace == "" {
		return nil, WorkspaceFilesOutput{}, errors.New("workspace is required")
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	files, err := wb.WorkspaceFiles(ctx, in.Workspace, in.Dir, client.WorkspaceHead)
	if err != nil {
		return nil, WorkspaceFilesOutput{}, fmt.Errorf("listing workspace %s: %w", in.Workspace, err)
	}
	out := WorkspaceFilesOutput{Workspace: in.Workspace, Entries: []WorkspaceEntry{}}
	var b strings.Builder
	if len(files) == 0 {
		fmt.Fprintf(&b, "Workspace %s has nothing there.\n", in.Workspace)
	}
	for i, f := range files {
		if i == maxListedEntries {
			out.Omitted = len(files) - i
			fmt.Fprintf(&b, "... and %d more; list a folder to see them\n", out.Omitted)
			break
		}
		e := WorkspaceEntry{Path: f.Path, Type: f.Type, Target: f.Target}
		switch f.Type {
		case "file":
			e.Size = f.Size
			fmt.Fprintf(&b, "%s (%d bytes)\n", f.Path, f.Size)
		case "dir":
			fmt.Fprintf(&b, "%s/\n", f.Path)
		default:
			fmt.Fprintf(&b, "%s -> %s\n", f.Path, f.Target)
		}
		out.Entries = append(out.Entries, e)
	}
	return textResult(b.String()), out, nil
}

func (h *handlers) readWorkspaceFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadWorkspaceFileInput) (*mcp.CallToolResult, ReadWorkspaceFileOutput, error) {
	wb, err := h.workspaces()
	if err != nil {
		return nil, ReadWorkspaceFileOutput{}, err
	}
	if in.Workspace == "" || in.Path == "" {
		return nil, ReadWorkspaceFileOutput{}, errors.New("workspace and path are required")
	}
	if in.Offset < 0 || in.MaxBytes < 0 || in.MaxBytes > maxReadBytes {
		return nil, ReadWorkspaceFileOutput{}, fmt.Errorf("offset must be at least 0 and max_bytes between 1 and %d", maxReadBytes)
	}
	want := int64(in.MaxBytes)
	if want == 0 {
		want = defaultReadBytes
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	rc, err := wb.OpenWorkspaceFile(ctx, in.Workspace, in.Path, client.WorkspaceHead)
	if err != nil {
		return nil, ReadWorkspaceFileOutput{}, fmt.Errorf("reading %s of workspace %s: %w", in.Path, in.Workspace, err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, in.Offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, ReadWorkspaceFileOutput{}, fmt.Errorf("reading %s of workspace %s: %w", in.Path, in.Workspace, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, want+1))
	if err != nil {
		return nil, ReadWorkspaceFileOutput{}, fmt.Errorf("reading %s of workspace %s: %w", in.Path, in.Workspace, err)
	}
	out := ReadWorkspaceFileOutput{Workspace: in.Workspace, Path: in.Path, Returned: returnedNone, Offset: in.Offset}
	if !looksLikeText(data) {
		return textResult(fmt.Sprintf("%s is binary; read it from code: run_python with workspace %q sees it at /workspace/%s\n",
			in.Path, in.Workspace, strings.TrimPrefix(in.Path, "/"))), out, nil
	}
	out.Returned = returnedText
	if int64(len(data)) > want {
		data, out.Truncated = trimToRune(data[:want]), true
	}
	out.Bytes = len(data)
	content := []mcp.Content{&mcp.TextContent{Text: string(data)}}
	switch {
	case out.Truncated:
		next := in.Offset + int64(len(data))
		content = append(content, &mcp.TextContent{Text: fmt.Sprintf(
			"\n[%s: bytes %d-%d shown; call read_workspace_file with offset %d to read on]\n", in.Path, in.Offset, next, next)})
	case len(data) == 0:
		content[0] = &mcp.TextContent{Text: fmt.Sprintf("[%s: nothing at offset %d]\n", in.Path, in.Offset)}
	}
	return &mcp.CallToolResult{Content: content}, out, nil
}

func (h *handlers) writeWorkspaceFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteWorkspaceFileInput) (*mcp.CallToolResult, WriteWorkspaceFileOutput, error) {
	wb, err := h.workspaces()
	if err != nil {
		return nil, WriteWorkspaceFileOutput{}, err
	}
	if in.Workspace == "" || in.Path == "" {
		return nil, WriteWorkspaceFileOutput{}, errors.New("workspace and path are required")
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	c, err := wb.WriteWorkspaceFile(ctx, in.Workspace, in.Path, strings.NewReader(in.Content))
	if err != nil {
		return nil, WriteWorkspaceFileOutput{}, fmt.Errorf("writing %s of workspace %s: %w", in.Path, in.Workspace, err)
	}
	out := WriteWorkspaceFileOutput{Workspace: in.Workspace, Version: c.Version, Changed: c.Changed}
	var b strings.Builder
	fmt.Fprintf(&b, "wrote %s (%d bytes); workspace %s is at version %d\n", in.Path, len(in.Content), in.Workspace, c.Version)
	for _, x := range c.Conflicts {
		s := x.Path + ": " + x.Reason
		if x.KeptAs != "" {
			s += "; this content is kept as " + x.KeptAs
		}
		out.Conflicts = append(out.Conflicts, s)
		fmt.Fprintf(&b, "conflict: %s\n", s)
	}
	return textResult(b.String()), out, nil
}

// workspaceMode is the workspace_mode of a call's read_only flag.
func workspaceMode(workspace string, readOnly bool) (string, error) {
	switch {
	case !readOnly:
		return "", nil
	case workspace == "":
		return "", errors.New("workspace_read_only needs a workspace")
	}
	return "ro", nil
}

// workspaceLine says, after a run, what became of its workspace.
func workspaceLine(w *client.WorkspaceOutcome) string {
	switch {
	case w == nil:
		return ""
	case w.Error != "":
		return fmt.Sprintf("workspace %s: its changes were not kept: %s\n", w.Name, w.Error)
	case !w.Changed:
		return fmt.Sprintf("workspace %s: unchanged, version %d\n", w.Name, w.Version)
	}
	s := fmt.Sprintf("workspace %s: version %d (%d added, %d modified, %d deleted)\n", w.Name, w.Version, w.Added, w.Modified, w.Deleted)
	for _, c := range w.Conflicts {
		s += fmt.Sprintf("workspace conflict: %s: %s (kept as %s)\n", c.Path, c.Reason, c.KeptAs)
	}
	return s
}
