package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SessionRequest creates a session (POST /api/v1/sessions). Zero values
// mean the server's defaults.
type SessionRequest struct {
	PythonVersion string            `json:"python_version,omitempty"`
	Requirements  string            `json:"requirements,omitempty"`
	EnvVars       map[string]string `json:"env_vars,omitempty"`
	MemoryMB      int               `json:"memory_mb,omitempty"`
	DiskMB        int               `json:"disk_mb,omitempty"`
	CPUShares     int               `json:"cpu_shares,omitempty"`
	// NetworkDisabled false asks for network; Network asks for it
	// limited to its Allow list, and Secrets names operator secrets for
	// the session, as for an execution (ExecutionConfig): the session
	// gets an egress of its own for its whole life.
	NetworkDisabled    *bool          `json:"network_disabled,omitempty"`
	Network            *NetworkConfig `json:"network,omitempty"`
	Secrets            []string       `json:"secrets,omitempty"`
	IdleTimeoutSeconds int            `json:"idle_timeout_seconds,omitempty"`
	MaxLifetimeSeconds int            `json:"max_lifetime_seconds,omitempty"`
	FigureFormat       string         `json:"figure_format,omitempty"`
	MaxRows            int            `json:"max_rows,omitempty"`
	// Workspace names a workspace of the key, mounted at /workspace for
	// the session's life; what the session leaves there is committed when
	// it ends. WorkspaceMode "ro" mounts it read-only.
	Workspace     string `json:"workspace,omitempty"`
	WorkspaceMode string `json:"workspace_mode,omitempty"`
	// FromSnapshot restores one of the caller's snapshots into the new
	// session: its variables and files, and its configuration for every
	// field left zero (see Snapshot).
	FromSnapshot string `json:"from_snapshot,omitempty"`
}

// Session describes a live session.
type Session struct {
	SessionID          string    `json:"session_id"`
	State              string    `json:"state"` // SessionIdle, SessionBusy or SessionHibernated
	PythonVersion      string    `json:"python_version"`
	Network            bool      `json:"network"`
	ExecutionCount     int       `json:"execution_count"`
	CreatedAt          time.Time `json:"created_at"`
	LastActivity       time.Time `json:"last_activity"`
	ExpiresAt          time.Time `json:"expires_at"`
	IdleTimeoutSeconds float64   `json:"idle_timeout_seconds"`
	MemoryBytes        int64     `json:"memory_bytes"`
	MemoryLimitBytes   int64     `json:"memory_limit_bytes"`
	DiskLimitBytes     int64     `json:"disk_limit_bytes"`
	Restarts           int       `json:"restarts"`
	// FromSnapshot is the snapshot the session was restored from.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// ForkedFrom is the session this one was forked from.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Skipped, on the answer of a restore or a fork only, names the
	// variables it could not load (a module the environment lacks).
	Skipped []SkippedVariable `json:"skipped,omitempty"`
}

// CellRequest is one cell (POST /api/v1/sessions/{id}/execute).
type CellRequest struct {
	Code string `json:"code"`
	// EvalLastExpr defaults to true on the server (nil); set it to false
	// to print nothing for a trailing expression.
	EvalLastExpr   *bool `json:"eval_last_expr,omitempty"`
	TimeoutSeconds int   `json:"timeout_seconds,omitempty"`
}

// CellResult is an ExecutionResult plus the session's counters.
type CellResult struct {
	ExecutionResult
	SessionID      string `json:"session_id"`
	ExecutionCount int    `json:"execution_count"`
	// SessionEnded says the session did not survive the cell.
	SessionEnded bool `json:"session_ended,omitempty"`
	// Resumed says the session was hibernated and resumed for this cell.
	Resumed bool `json:"resumed,omitempty"`
	// RestoredFrom, on the first cell of a session whose node was lost,
	// names the checkpoint it resumed from and the cells lost since.
	RestoredFrom *RestoredFrom `json:"restored_from,omitempty"`
}

// RestoredFrom is the checkpoint a session resumed from after its node
// was lost; the effects of its CellsLost later cells are gone, and of
// every cell numbered above CheckpointExecutionCount before this one
// (CellsLost may undercount them: docs/sessions.md).
type RestoredFrom struct {
	SnapshotID               string `json:"snapshot_id"`
	CellsLost                int    `json:"cells_lost"`
	CheckpointExecutionCount int    `json:"checkpoint_execution_count"`
}

// SessionFile is a file of a session's workspace.
type SessionFile struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

func sessionPath(id string) string { return "/api/v1/sessions/" + url.PathEscape(id) }

func sessionFilePath(id, p string) string {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return sessionPath(id) + "/files/" + strings.Join(parts, "/")
}

// CreateSession starts a session. Over the server's caps it fails with a
// *APIError of status 429.
func (c *Client) CreateSession(ctx context.Context, req *SessionRequest) (*Session, error) {
	if req == nil {
		req = &SessionRequest{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var s Session
	if err := c.call(ctx, http.MethodPost, "/api/v1/sessions", body, "application/json", http.StatusCreated, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// GetSession describes a session; an unknown one is a 404 *APIError.
func (c *Client) GetSession(ctx context.Context, id string) (*Session, error) {
	var s Session
	if err := c.call(ctx, http.MethodGet, sessionPath(id), nil, "", 0, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists the caller's live sessions, oldest first.
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	var out struct {
		Sessions []Session `json:"sessions"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/sessions", nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// DeleteSession ends a session and removes its files.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, sessionPath(id), nil, "", http.StatusNoContent, nil)
}

// ExecuteCell runs code in a session. A cell already running is a 409
// *APIError.
func (c *Client) ExecuteCell(ctx context.Context, id string, req *CellRequest) (*CellResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var r CellResult
	if err := c.call(ctx, http.MethodPost, sessionPath(id)+"/execute", body, "application/json", 0, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// InterruptSession raises KeyboardInterrupt in the running cell.
func (c *Client) InterruptSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, sessionPath(id)+"/interrupt", nil, "", 0, nil)
}

// RestartSession starts a fresh interpreter; the files stay.
func (c *Client) RestartSession(ctx context.Context, id string) (*Session, error) {
	var s Session
	if err := c.call(ctx, http.MethodPost, sessionPath(id)+"/restart", nil, "", 0, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UploadSessionFile writes data to path in the session's workspace.
func (c *Client) UploadSessionFile(ctx context.Context, id, path string, data []byte) error {
	return c.call(ctx, http.MethodPut, sessionFilePath(id, path), data, "application/octet-stream", http.StatusCreated, nil)
}

// ListSessionFiles lists the files of the session's workspace.
func (c *Client) ListSessionFiles(ctx context.Context, id string) ([]SessionFile, error) {
	var out struct {
		Files []SessionFile `json:"files"`
	}
	if err := c.call(ctx, http.MethodGet, sessionPath(id)+"/files", nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Files, nil
}

// DownloadSessionFile reads a file of the session's workspace.
func (c *Client) DownloadSessionFile(ctx context.Context, id, path string) ([]byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, http.MethodGet, sessionFilePath(id, path), nil, "")
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "*/*")
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading the file: %w", sessionFilePath(id, path), err)
	}
	return data, nil
}

// PortShare is a preview URL of a port a session serves.
type PortShare struct {
	// URL opens the app in a browser without the key; a path on the
	// server's origin is made absolute against the client's base URL.
	URL       string    `json:"url"`
	SessionID string    `json:"session_id"`
	Port      int       `json:"port"`
	ExpiresAt time.Time `json:"expires_at"`
	// Isolation: sandbox, preview_host or per_preview.
	Isolation string `json:"isolation"`
}

func sessionPortPath(id string, port int) string {
	return sessionPath(id) + "/ports/" + strconv.Itoa(port)
}

// ShareSessionPort returns a preview URL of the web app the session
// serves on port. A server without --preview answers a 501 *APIError.
func (c *Client) ShareSessionPort(ctx context.Context, id string, port int) (*PortShare, error) {
	var s PortShare
	if err := c.call(ctx, http.MethodPost, sessionPortPath(id, port)+"/share", nil, "", http.StatusCreated, &s); err != nil {
		return nil, err
	}
	if strings.HasPrefix(s.URL, "/") {
		s.URL = withoutUserinfo(c.baseURL) + s.URL
	}
	return &s, nil
}

// withoutUserinfo is base without a user:password@ it may carry: a
// preview URL is made to be handed on, the base URL's credentials are not.
func withoutUserinfo(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.User == nil {
		return base
	}
	u.User = nil
	return u.String()
}

// RevokeSessionPort revokes every preview URL of the session's port and
// says how many still worked.
func (c *Client) RevokeSessionPort(ctx context.Context, id string, port int) (int, error) {
	var out struct {
		Revoked int `json:"revoked"`
	}
	if err := c.call(ctx, http.MethodDelete, sessionPortPath(id, port)+"/share", nil, "", 0, &out); err != nil {
		return 0, err
	}
	return out.Revoked, nil
}
