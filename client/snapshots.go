package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The states of a session (Session.State).
const (
	SessionIdle = "idle"
	SessionBusy = "busy"
	// SessionHibernated: saved without an interpreter after the server's
	// hibernation delay; its next call resumes it (CellResult.Resumed).
	SessionHibernated = "hibernated"
)

// SkippedVariable is a variable a snapshot left out, or a restore could
// not load, and why (a thread, an open socket, a module the environment
// lacks).
type SkippedVariable struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// SnapshotSaved is the answer of Snapshot.
type SnapshotSaved struct {
	SnapshotID string `json:"snapshot_id"`
	// Bytes is the stored size: state, workspace files and header.
	Bytes int64 `json:"bytes"`
	// ExecutionCount is the session's cells when it was saved; a session
	// restored from it counts on from there.
	ExecutionCount int               `json:"execution_count"`
	Saved          []string          `json:"saved"`
	Skipped        []SkippedVariable `json:"skipped"`
}

// SnapshotInfo describes a stored snapshot (ListSnapshots).
type SnapshotInfo struct {
	SnapshotID string `json:"snapshot_id"`
	// SessionID is the session it was made of.
	SessionID      string            `json:"session_id"`
	Bytes          int64             `json:"bytes"`
	CreatedAt      time.Time         `json:"created_at"`
	PythonVersion  string            `json:"python_version"`
	ExecutionCount int               `json:"execution_count"`
	Skipped        []SkippedVariable `json:"skipped"`
}

// Snapshot saves a session's variables, imports and workspace files as a
// snapshot of the caller's key; restore it with CreateSession and
// SessionRequest.FromSnapshot. A cell running is a 409 *APIError, a state
// over the size cap 413, the key's quota full 429, a server without a
// store for snapshots 501.
func (c *Client) Snapshot(ctx context.Context, sessionID string) (*SnapshotSaved, error) {
	var s SnapshotSaved
	if err := c.call(ctx, http.MethodPost, sessionPath(sessionID)+"/snapshot", nil, "", http.StatusCreated, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fork starts a new session holding a copy of the session's state and
// files (Session.ForkedFrom names the parent); the two then diverge.
func (c *Client) Fork(ctx context.Context, sessionID string) (*Session, error) {
	var s Session
	if err := c.call(ctx, http.MethodPost, sessionPath(sessionID)+"/fork", nil, "", http.StatusCreated, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSnapshots lists the caller's snapshots, oldest first.
func (c *Client) ListSnapshots(ctx context.Context) ([]SnapshotInfo, error) {
	var out struct {
		Snapshots []SnapshotInfo `json:"snapshots"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/snapshots", nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// DeleteSnapshot deletes a snapshot; an unknown one (or another key's) is
// a 404 *APIError.
func (c *Client) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	return c.call(ctx, http.MethodDelete, "/api/v1/snapshots/"+url.PathEscape(snapshotID), nil, "", http.StatusNoContent, nil)
}
