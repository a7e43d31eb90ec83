package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// SessionBackend is what the session tools need; the Go client implements
// it. A Backend without it answers those tools with an error.
type SessionBackend interface {
	CreateSessionWithProgress(ctx context.Context, req *client.SessionRequest, progress func(line string)) (*client.Session, error)
	DeleteSession(ctx context.Context, id string) error
	ExecuteCell(ctx context.Context, id string, req *client.CellRequest) (*client.CellResult, error)
	UploadSessionFile(ctx context.Context, id, path string, data []byte) error
}

var _ SessionBackend = (*client.Client)(nil)

var errNoSessions = errors.New("this server's backend does not offer sessions")

// CreateSessionInput are the arguments of create_session.
type CreateSessionInput struct {
	PythonVersion      string   `json:"python_version,omitempty" jsonschema:"Python version to use, as MAJOR.MINOR (e.g. 3.12). Default: the server's default version."`
	IdleTimeoutSeconds int      `json:"idle_timeout_seconds,omitempty" jsonschema:"The session ends after this many seconds without a call. Default: the server's."`
	Network            bool     `json:"network,omitempty" jsonschema:"Network for the session's whole life (the server's operator must allow it), through an egress of its own with the same rules as run_python's."`
	NetworkAllow       []string `json:"network_allow,omitempty" jsonschema:"Limit the session's network to these destinations (e.g. [\"pypi.org:443\", \"*.github.com\"]); each must also be allowed by the server's operator. Implies network."`
	Secrets            []string `json:"secrets,omitempty" jsonschema:"Names of credentials the server's operator defined (e.g. [\"GITHUB_TOKEN\"]): the session's code finds an environment variable of each name holding a placeholder (a new one after a restart, a resume or a fork), and the server puts the real value in its place when the code sends it, as the operator's header, to that credential's hosts. The code never sees the value. An unknown name is refused. Implies network."`
	Workspace          string   `json:"workspace,omitempty" jsonschema:"A workspace of yours (list_workspaces) mounted at /workspace for the session's life; what the session leaves there is kept when it closes."`
	WorkspaceRO        bool     `json:"workspace_read_only,omitempty" jsonschema:"Mount the workspace read-only."`
	Requirements       []string `json:"requirements,omitempty" jsonschema:"Packages to install into the session, as pip requirement specifiers, e.g. [\"polars\", \"requests==2.32.3\"]. The session already has the server's base packages (by default numpy, pandas, matplotlib, requests, beautifulsoup4, scipy); these go on top of them."`
	FromSnapshot       string   `json:"from_snapshot,omitempty" jsonschema:"A snapshot_id from snapshot_session: the new session holds that snapshot's variables and files, and its configuration for what this call leaves out."`
}

// CreateSessionOutput is create_session's result.
type CreateSessionOutput struct {
	SessionID     string `json:"session_id" jsonschema:"Pass as session_id to run_python to run code in this session."`
	PythonVersion string `json:"python_version"`
	// Skipped, on a restore, names what it could not load.
	Skipped []SkippedVariable `json:"skipped,omitempty" jsonschema:"On a restore from a snapshot: variables the new session could not load."`
}

// CloseSessionInput are the arguments of close_session.
type CloseSessionInput struct {
	SessionID string `json:"session_id" jsonschema:"The session to end."`
}

// CloseSessionOutput is close_session's result.
type CloseSessionOutput struct {
	Closed bool `json:"closed"`
}

func createSessionTool() *mcp.Tool {
	in := schemaFor[CreateSessionInput]()
	in.Properties["python_version"].Pattern = pythonVersion.String()
	return &mcp.Tool{
		Name:  "create_session",
		Title: "Create a Python session",
		Description: "Start a persistent Python session, like a notebook kernel: variables, imports and files are kept " +
			"between run_python calls that pass its session_id. It comes with the server's base packages for data work " +
			"(numpy, pandas, matplotlib... unless the operator chose others); list more in requirements. Use it for " +
			"step-by-step work on data; call close_session when done (idle sessions also end by themselves).",
		InputSchema:  in,
		OutputSchema: schemaFor[CreateSessionOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Create a Python session", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}
}

func closeSessionTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         "close_session",
		Title:        "Close a Python session",
		Description:  "End a session created by create_session; its variables and files are discarded.",
		InputSchema:  schemaFor[CloseSessionInput](),
		OutputSchema: schemaFor[CloseSessionOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Close a Python session", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

func (h *handlers) sessions() (SessionBackend, error) {
	sb, ok := h.backend.(SessionBackend)
	if !ok {
		return nil, errNoSessions
	}
	return sb, nil
}

func (h *handlers) createSession(ctx context.Context, call *mcp.CallToolRequest, in CreateSessionInput) (*mcp.CallToolResult, CreateSessionOutput, error) {
	sb, err := h.sessions()
	if err != nil {
		return nil, CreateSessionOutput{}, err
	}
	if in.PythonVersion != "" && !pythonVersion.MatchString(in.PythonVersion) {
		return nil, CreateSessionOutput{}, fmt.Errorf("python_version %q is not MAJOR.MINOR, e.g. 3.12", in.PythonVersion)
	}
	reqs, err := requirementsTxt(in.Requirements)
	if err != nil {
		return nil, CreateSessionOutput{}, err
	}
	mode, err := workspaceMode(in.Workspace, in.WorkspaceRO)
	if err != nil {
		return nil, CreateSessionOutput{}, err
	}
	req := &client.SessionRequest{PythonVersion: in.PythonVersion, IdleTimeoutSeconds: in.IdleTimeoutSeconds,
		NetworkDisabled: client.Bool(!in.Network && len(in.NetworkAllow) == 0 && len(in.Secrets) == 0),
		Secrets:         in.Secrets, Requirements: reqs, Workspace: in.Workspace, WorkspaceMode: mode,
		FromSnapshot: in.FromSnapshot}
	if len(in.NetworkAllow) > 0 {
		req.Network = &client.NetworkConfig{Allow: in.NetworkAllow}
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	p := newProgress(call, h.log)
	s, err := sb.CreateSessionWithProgress(ctx, req, func(line string) {
		p.event(ctx, client.Event{Type: client.EventInstall, Data: line})
	})
	if err != nil {
		return nil, CreateSessionOutput{}, fmt.Errorf("creating the session: %w", err)
	}
	out := CreateSessionOutput{SessionID: s.SessionID, PythonVersion: s.PythonVersion}
	text := fmt.Sprintf("session %s started (Python %s)", s.SessionID, s.PythonVersion)
	if s.FromSnapshot != "" {
		out.Skipped = skippedOf(s.Skipped)
		text += fmt.Sprintf(" from snapshot %s\n%s", s.FromSnapshot, skippedText(s.Skipped))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

func (h *handlers) closeSession(ctx context.Context, _ *mcp.CallToolRequest, in CloseSessionInput) (*mcp.CallToolResult, CloseSessionOutput, error) {
	sb, err := h.sessions()
	if err != nil {
		return nil, CloseSessionOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	if err := sb.DeleteSession(ctx, in.SessionID); err != nil {
		return nil, CloseSessionOutput{}, fmt.Errorf("closing session %s: %w", in.SessionID, err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "session " + in.SessionID + " closed"}}},
		CloseSessionOutput{Closed: true}, nil
}

// runCell is run_python with a session_id: the code runs as the session's
// next cell, after the call's files are written into its workspace.
func (h *handlers) runCell(ctx context.Context, in RunPythonInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	sb, err := h.sessions()
	if err != nil {
		return nil, RunPythonOutput{}, err
	}
	if in.Stdin != "" || in.PythonVersion != "" || in.Network || len(in.NetworkAllow) > 0 || len(in.Secrets) > 0 || len(in.Requirements) > 0 ||
		in.Workspace != "" || in.WorkspaceRO {
		return nil, RunPythonOutput{}, errors.New("stdin, python_version, network, secrets, workspace and requirements do not apply to a session's cell (set them at create_session)")
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	for i, f := range in.Files {
		if err := sb.UploadSessionFile(ctx, in.SessionID, f.Path, []byte(f.Content)); err != nil {
			return nil, RunPythonOutput{}, fmt.Errorf("files[%d]: %w", i, err)
		}
	}
	r, err := sb.ExecuteCell(ctx, in.SessionID, &client.CellRequest{Code: in.Code, TimeoutSeconds: in.TimeoutSeconds})
	if err != nil {
		return nil, RunPythonOutput{}, fmt.Errorf("running the cell: %w", err)
	}
	rc := newRich(&r.ExecutionResult)
	out := newRunPythonOutput(&r.ExecutionResult)
	out.Outputs = rc.outputs
	out.SessionID, out.ExecutionCount = r.SessionID, r.ExecutionCount
	var text strings.Builder
	text.WriteString(renderResult(&r.ExecutionResult))
	if r.Result != nil {
		out.Result = *r.Result
		text.WriteString("value: " + *r.Result + "\n")
	}
	text.WriteString(rc.text)
	if r.Resumed {
		text.WriteString("the session had been idle and hibernated: it was resumed for this call (threads, open files and sockets did not survive)\n")
	}
	if r.SessionEnded {
		text.WriteString("the session ended; create a new one to continue\n")
	}
	content := append([]mcp.Content{&mcp.TextContent{Text: text.String()}}, rc.images...)
	return &mcp.CallToolResult{Content: content, IsError: failed(&r.ExecutionResult)}, out, nil
}
