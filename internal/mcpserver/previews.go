package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// PreviewBackend is what preview_session_port needs; the Go client
// implements it. A Backend without it answers the tool with an error.
type PreviewBackend interface {
	ShareSessionPort(ctx context.Context, id string, port int) (*client.PortShare, error)
	RevokeSessionPort(ctx context.Context, id string, port int) (int, error)
}

var _ PreviewBackend = (*client.Client)(nil)

var errNoPreviews = errors.New("this server's backend does not offer previews")

// previewToolName is the name of the preview tool, which a server without
// --preview does not offer.
const previewToolName = "preview_session_port"

// PreviewSessionPortInput are the arguments of preview_session_port.
type PreviewSessionPortInput struct {
	SessionID string `json:"session_id" jsonschema:"The session whose code serves the web app (ses_...)."`
	Port      int    `json:"port" jsonschema:"The TCP port the app listens on inside the session, e.g. 8000."`
	Revoke    bool   `json:"revoke,omitempty" jsonschema:"Instead of a new URL, revoke every preview URL of that port: they stop working at once."`
}

// PreviewSessionPortOutput is preview_session_port's result.
type PreviewSessionPortOutput struct {
	URL       string `json:"url,omitempty" jsonschema:"Opens the app in a browser without an API key, until expires_at or a revoke; hand it to the user."`
	ExpiresAt string `json:"expires_at,omitempty" jsonschema:"When the URL stops working (RFC 3339)."`
	Isolation string `json:"isolation,omitempty" jsonschema:"How the app is kept from the API's origin: sandbox, preview_host or per_preview."`
	Revoked   int    `json:"revoked" jsonschema:"With revoke: how many URLs still worked and were revoked."`
}

func previewSessionPortTool() *mcp.Tool {
	in := schemaFor[PreviewSessionPortInput]()
	in.Properties["port"].Minimum = ptr(1.0)
	in.Properties["port"].Maximum = ptr(65535.0)
	return &mcp.Tool{
		Name:  previewToolName,
		Title: "Preview a web app of a session",
		Description: "Return a URL that opens, in a browser and without an API key, the web app (FastAPI, Streamlit, " +
			"Gradio, http.server...) that code of a session serves on a port: start the app in the background with " +
			"run_python and that session_id, listening on 127.0.0.1 or 0.0.0.0, then call this tool. The URL expires " +
			"(expires_at) and works while the session lives; with revoke=true every URL of that port stops working. " +
			"Apps behind a path prefix need relative links (FastAPI's root_path, Streamlit's server.baseUrlPath).",
		InputSchema:  in,
		OutputSchema: schemaFor[PreviewSessionPortOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Preview a web app of a session", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}
}

func (h *handlers) previewSessionPort(ctx context.Context, _ *mcp.CallToolRequest, in PreviewSessionPortInput) (*mcp.CallToolResult, PreviewSessionPortOutput, error) {
	pb, ok := h.backend.(PreviewBackend)
	if !ok {
		return nil, PreviewSessionPortOutput{}, errNoPreviews
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	if in.Revoke {
		n, err := pb.RevokeSessionPort(ctx, in.SessionID, in.Port)
		if err != nil {
			return nil, PreviewSessionPortOutput{}, fmt.Errorf("revoking the previews of port %d of session %s: %w", in.Port, in.SessionID, err)
		}
		text := fmt.Sprintf("revoked %d preview URL(s) of port %d of session %s\n", n, in.Port, in.SessionID)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, PreviewSessionPortOutput{Revoked: n}, nil
	}
	s, err := pb.ShareSessionPort(ctx, in.SessionID, in.Port)
	if err != nil {
		return nil, PreviewSessionPortOutput{}, fmt.Errorf("previewing port %d of session %s: %w", in.Port, in.SessionID, err)
	}
	out := PreviewSessionPortOutput{URL: s.URL, ExpiresAt: s.ExpiresAt.UTC().Format(time.RFC3339), Isolation: s.Isolation}
	text := fmt.Sprintf("preview of port %d of session %s: %s\nexpires at %s (isolation: %s)\n", in.Port, in.SessionID,
		s.URL, out.ExpiresAt, s.Isolation)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}
