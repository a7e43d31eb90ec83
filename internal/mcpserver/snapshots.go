package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// SnapshotBackend is what the snapshot tools need; the Go client
// implements it. A Backend without it answers those tools with an error.
type SnapshotBackend interface {
	Snapshot(ctx context.Context, sessionID string) (*client.SnapshotSaved, error)
	Fork(ctx context.Context, sessionID string) (*client.Session, error)
	ListSnapshots(ctx context.Context) ([]client.SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, snapshotID string) error
}

var _ SnapshotBackend = (*client.Client)(nil)

var errNoSnapshots = errors.New("this server's backend does not offer snapshots")

// SkippedVariable is a variable a snapshot or a fork left out, and why.
type SkippedVariable struct {
	Name   string `json:"name"`
	Reason string `json:"reason" jsonschema:"Why it was left out, e.g. a thread, an open socket, a module the environment lacks."`
}

// SessionIDInput names a session, for snapshot_session and fork_session.
type SessionIDInput struct {
	SessionID string `json:"session_id" jsonschema:"The session, as create_session returned it (ses_...)."`
}

// SnapshotSessionOutput is snapshot_session's result.
type SnapshotSessionOutput struct {
	SnapshotID     string            `json:"snapshot_id" jsonschema:"Pass as from_snapshot to create_session to get a session holding this state again, later or elsewhere."`
	Bytes          int64             `json:"bytes"`
	ExecutionCount int               `json:"execution_count"`
	Saved          []string          `json:"saved" jsonschema:"The variables saved."`
	Skipped        []SkippedVariable `json:"skipped" jsonschema:"The variables left out; they will not be there after a restore."`
}

// ForkSessionOutput is fork_session's result.
type ForkSessionOutput struct {
	SessionID  string            `json:"session_id" jsonschema:"The new session: pass as session_id to run_python."`
	ForkedFrom string            `json:"forked_from"`
	Skipped    []SkippedVariable `json:"skipped,omitempty" jsonschema:"Variables the new session could not load."`
}

// ListSnapshotsInput are the (no) arguments of list_snapshots.
type ListSnapshotsInput struct{}

// SnapshotEntry describes one stored snapshot.
type SnapshotEntry struct {
	SnapshotID     string `json:"snapshot_id"`
	SessionID      string `json:"session_id" jsonschema:"The session it was made of."`
	Bytes          int64  `json:"bytes"`
	CreatedAt      string `json:"created_at" jsonschema:"When it was made (RFC 3339)."`
	PythonVersion  string `json:"python_version"`
	ExecutionCount int    `json:"execution_count"`
}

// ListSnapshotsOutput is list_snapshots' result.
type ListSnapshotsOutput struct {
	Snapshots []SnapshotEntry `json:"snapshots"`
}

// DeleteSnapshotInput names a snapshot, for delete_snapshot.
type DeleteSnapshotInput struct {
	SnapshotID string `json:"snapshot_id" jsonschema:"The snapshot to delete (snap_...)."`
}

// DeleteSnapshotOutput is delete_snapshot's result.
type DeleteSnapshotOutput struct {
	Deleted bool `json:"deleted"`
}

func snapshotSessionTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "snapshot_session",
		Title: "Save a Python session",
		Description: "Save a session's variables, imports, functions and files as a snapshot, and return its snapshot_id. " +
			"The session goes on unchanged. Later, even after the session ended, create_session with from_snapshot " +
			"starts a session holding that state again. Variables that cannot be saved (threads, open files or sockets, " +
			"generators) are listed in skipped. Not while a cell of the session runs.",
		InputSchema:  schemaFor[SessionIDInput](),
		OutputSchema: schemaFor[SnapshotSessionOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Save a Python session", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}
}

func forkSessionTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  "fork_session",
		Title: "Fork a Python session",
		Description: "Start a new session holding a copy of a session's variables and files, and return its session_id. " +
			"The two then diverge: a change in one is not seen in the other. Use it to try something risky on a copy " +
			"of your work, or to explore two alternatives from the same state.",
		InputSchema:  schemaFor[SessionIDInput](),
		OutputSchema: schemaFor[ForkSessionOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Fork a Python session", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}
}

func listSnapshotsTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         "list_snapshots",
		Title:        "List saved sessions",
		Description:  "List the snapshots made with snapshot_session, oldest first.",
		InputSchema:  schemaFor[ListSnapshotsInput](),
		OutputSchema: schemaFor[ListSnapshotsOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "List saved sessions", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}
}

func deleteSnapshotTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         "delete_snapshot",
		Title:        "Delete a saved session",
		Description:  "Delete a snapshot made with snapshot_session; sessions restored from it are not affected.",
		InputSchema:  schemaFor[DeleteSnapshotInput](),
		OutputSchema: schemaFor[DeleteSnapshotOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Delete a saved session", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}
}

func (h *handlers) snapshots() (SnapshotBackend, error) {
	sb, ok := h.backend.(SnapshotBackend)
	if !ok {
		return nil, errNoSnapshots
	}
	return sb, nil
}

func skippedOf(list []client.SkippedVariable) []SkippedVariable {
	out := make([]SkippedVariable, len(list))
	for i, s := range list {
		out[i] = SkippedVariable(s)
	}
	return out
}

// skippedText is a line for each variable left out.
func skippedText(list []client.SkippedVariable) string {
	var b strings.Builder
	for _, s := range list {
		fmt.Fprintf(&b, "skipped %s: %s\n", s.Name, s.Reason)
	}
	return b.String()
}

func (h *handlers) snapshotSession(ctx context.Context, _ *mcp.CallToolRequest, in SessionIDInput) (*mcp.CallToolResult, SnapshotSessionOutput, error) {
	sb, err := h.snapshots()
	if err != nil {
		return nil, SnapshotSessionOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	s, err := sb.Snapshot(ctx, in.SessionID)
	if err != nil {
		return nil, SnapshotSessionOutput{}, fmt.Errorf("saving session %s: %w", in.SessionID, err)
	}
	out := SnapshotSessionOutput{SnapshotID: s.SnapshotID, Bytes: s.Bytes, ExecutionCount: s.ExecutionCount,
		Saved: s.Saved, Skipped: skippedOf(s.Skipped)}
	if out.Saved == nil {
		out.Saved = []string{}
	}
	text := fmt.Sprintf("session %s saved as snapshot %s (%d bytes, %d variables)\n%s", in.SessionID, s.SnapshotID, s.Bytes,
		len(s.Saved), skippedText(s.Skipped))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

func (h *handlers) forkSession(ctx context.Context, _ *mcp.CallToolRequest, in SessionIDInput) (*mcp.CallToolResult, ForkSessionOutput, error) {
	sb, err := h.snapshots()
	if err != nil {
		return nil, ForkSessionOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	s, err := sb.Fork(ctx, in.SessionID)
	if err != nil {
		return nil, ForkSessionOutput{}, fmt.Errorf("forking session %s: %w", in.SessionID, err)
	}
	out := ForkSessionOutput{SessionID: s.SessionID, ForkedFrom: s.ForkedFrom, Skipped: skippedOf(s.Skipped)}
	text := fmt.Sprintf("session %s forked from %s\n%s", s.SessionID, in.SessionID, skippedText(s.Skipped))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

func (h *handlers) listSnapshots(ctx context.Context, _ *mcp.CallToolRequest, _ ListSnapshotsInput) (*mcp.CallToolResult, ListSnapshotsOutput, error) {
	sb, err := h.snapshots()
	if err != nil {
		return nil, ListSnapshotsOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	list, err := sb.ListSnapshots(ctx)
	if err != nil {
		return nil, ListSnapshotsOutput{}, fmt.Errorf("listing snapshots: %w", err)
	}
	out := ListSnapshotsOutput{Snapshots: make([]SnapshotEntry, len(list))}
	var text strings.Builder
	for i, s := range list {
		out.Snapshots[i] = SnapshotEntry{SnapshotID: s.SnapshotID, SessionID: s.SessionID, Bytes: s.Bytes,
			CreatedAt: s.CreatedAt.UTC().Format(time.RFC3339), PythonVersion: s.PythonVersion, ExecutionCount: s.ExecutionCount}
		fmt.Fprintf(&text, "%s  of %s  Python %s  %d cells  %d bytes  %s\n", s.SnapshotID, s.SessionID, s.PythonVersion,
			s.ExecutionCount, s.Bytes, out.Snapshots[i].CreatedAt)
	}
	if len(list) == 0 {
		text.WriteString("no snapshots\n")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}, out, nil
}

func (h *handlers) deleteSnapshot(ctx context.Context, _ *mcp.CallToolRequest, in DeleteSnapshotInput) (*mcp.CallToolResult, DeleteSnapshotOutput, error) {
	sb, err := h.snapshots()
	if err != nil {
		return nil, DeleteSnapshotOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	if err := sb.DeleteSnapshot(ctx, in.SnapshotID); err != nil {
		return nil, DeleteSnapshotOutput{}, fmt.Errorf("deleting snapshot %s: %w", in.SnapshotID, err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "snapshot " + in.SnapshotID + " deleted"}}},
		DeleteSnapshotOutput{Deleted: true}, nil
}
