package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Workspaces are named file trees of an API key that outlive runs: a run
// or session names one (ExecutionConfig.Workspace,
// SessionRequest.Workspace) and sees it at /workspace; what it leaves there
// is committed as the workspace's next version (pyexec servers only; see
// docs/workspaces.md). Another key's workspace is a 404 *APIError, as an
// unknown one.

// Workspace describes a workspace and its current version.
type Workspace struct {
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	QuotaBytes int64     `json:"quota_bytes"`
	Version    int64     `json:"version"`
	Bytes      int64     `json:"bytes"`
	Files      int       `json:"files"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
}

// WorkspaceFile is one entry of a workspace: a file, a directory or a
// symbolic link (Type "file", "dir" or "symlink").
type WorkspaceFile struct {
	Path    string      `json:"path"`
	Type    string      `json:"type"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mtime,omitzero"`
	SHA256  string      `json:"sha256,omitempty"`
	Target  string      `json:"target,omitempty"`
}

// WorkspaceVersion is one kept version of a workspace. Source says what
// made it: "create", "run <id>", "upload", "write", "delete", "restore of
// version N".
type WorkspaceVersion struct {
	Number  int64     `json:"number"`
	Parent  int64     `json:"parent"`
	Bytes   int64     `json:"bytes"`
	Files   int       `json:"files"`
	Created time.Time `json:"created"`
	Source  string    `json:"source"`
}

// WorkspaceCommit is what a change to a workspace made: Version is the
// version after it (a new one when Changed). Conflicts are paths another
// writer changed since Base (this writer's content is kept as KeptAs);
// Refused are paths that were not kept.
type WorkspaceCommit struct {
	Version   int64               `json:"version"`
	Base      int64               `json:"base"`
	Changed   bool                `json:"changed"`
	Added     int                 `json:"added"`
	Modified  int                 `json:"modified"`
	Deleted   int                 `json:"deleted"`
	Conflicts []WorkspaceConflict `json:"conflicts,omitempty"`
	Refused   []WorkspaceRefused  `json:"refused,omitempty"`
}

// WorkspaceConflict is a path both this writer and another changed.
type WorkspaceConflict struct {
	Path   string `json:"path"`
	KeptAs string `json:"kept_as,omitempty"`
	Reason string `json:"reason"`
}

// WorkspaceRefused is a path of a change that was not kept, and why.
type WorkspaceRefused struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// WorkspaceOutcome, on a result, is what became of the run's workspace.
// Error is set when its changes could not be kept (the workspace then
// stays at Base).
type WorkspaceOutcome struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	WorkspaceCommit
	Error string `json:"error,omitempty"`
}

// WorkspaceHead, as a version, is the current one.
const WorkspaceHead int64 = -1

func workspacePath(name string) string { return "/api/v1/workspaces/" + url.PathEscape(name) }

// workspaceQuery is "?k=v&…" of the non-empty values, "" when none.
func workspaceQuery(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func versionParam(v int64) string {
	if v < 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// CreateWorkspace makes an empty workspace (version 0); quotaMB 0 takes
// the server's default. One of that name already is a 409 *APIError, a
// quota beyond the server's caps a 413.
func (c *Client) CreateWorkspace(ctx context.Context, name string, quotaMB int) (*Workspace, error) {
	body, err := json.Marshal(struct {
		Name    string `json:"name"`
		QuotaMB int    `json:"quota_mb,omitempty"`
	}{name, quotaMB})
	if err != nil {
		return nil, err
	}
	var w Workspace
	if err := c.call(ctx, http.MethodPost, "/api/v1/workspaces", body, "application/json", http.StatusCreated, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWorkspaces lists the caller's workspaces.
func (c *Client) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	return c.listWorkspaces(ctx, "/api/v1/workspaces")
}

// ListAllWorkspaces lists every key's workspaces (?all=true): an operator
// key's call; the server answers another key's with its own workspaces.
func (c *Client) ListAllWorkspaces(ctx context.Context) ([]Workspace, error) {
	return c.listWorkspaces(ctx, "/api/v1/workspaces?all=true")
}

func (c *Client) listWorkspaces(ctx context.Context, path string) ([]Workspace, error) {
	var out struct {
		Workspaces []Workspace `json:"workspaces"`
	}
	if err := c.call(ctx, http.MethodGet, path, nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// GetWorkspace describes one workspace.
func (c *Client) GetWorkspace(ctx context.Context, name string) (*Workspace, error) {
	var w Workspace
	if err := c.call(ctx, http.MethodGet, workspacePath(name), nil, "", 0, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWorkspace deletes a workspace with all its versions.
func (c *Client) DeleteWorkspace(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, workspacePath(name), nil, "", http.StatusNoContent, nil)
}

// WorkspaceVersions lists the kept versions, oldest first.
func (c *Client) WorkspaceVersions(ctx context.Context, name string) ([]WorkspaceVersion, error) {
	var out struct {
		Versions []WorkspaceVersion `json:"versions"`
	}
	if err := c.call(ctx, http.MethodGet, workspacePath(name)+"/versions", nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// RestoreWorkspace makes a new version equal to the kept version.
func (c *Client) RestoreWorkspace(ctx context.Context, name string, version int64) (*WorkspaceCommit, error) {
	body, err := json.Marshal(struct {
		Version int64 `json:"version"`
	}{version})
	if err != nil {
		return nil, err
	}
	var out WorkspaceCommit
	if err := c.call(ctx, http.MethodPost, workspacePath(name)+"/restore", body, "application/json", 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceFiles lists the entries below dir ("" for all) of a version
// (WorkspaceHead for the current one).
func (c *Client) WorkspaceFiles(ctx context.Context, name, dir string, version int64) ([]WorkspaceFile, error) {
	return c.WorkspaceFilesOf(ctx, "", name, dir, version)
}

// WorkspaceFilesOf is WorkspaceFiles of the workspace name of the key
// owner (?owner=): an operator key's call ("" is the caller's own); for
// any other key another's workspace is not found.
func (c *Client) WorkspaceFilesOf(ctx context.Context, owner, name, dir string, version int64) ([]WorkspaceFile, error) {
	var out struct {
		Files []WorkspaceFile `json:"files"`
	}
	p := workspacePath(name) + "/files" + workspaceQuery("dir", dir, "version", versionParam(version), "owner", owner)
	if err := c.call(ctx, http.MethodGet, p, nil, "", 0, &out); err != nil {
		return nil, err
	}
	return out.Files, nil
}

func workspaceFilePath(name, p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return workspacePath(name) + "/files/" + strings.Join(segs, "/")
}

// WriteWorkspaceFile writes r as the file path of the workspace (a new
// version); the folders above it are made.
func (c *Client) WriteWorkspaceFile(ctx context.Context, name, path string, r io.Reader) (*WorkspaceCommit, error) {
	return c.workspaceChange(ctx, http.MethodPut, workspaceFilePath(name, path), r, "application/octet-stream")
}

// UploadWorkspace unpacks a tar (gzip accepted) into the folder dir of the
// workspace ("" for its top), all or nothing, as one new version. The
// Tar* helpers build one.
func (c *Client) UploadWorkspace(ctx context.Context, name, dir string, tarData io.Reader) (*WorkspaceCommit, error) {
	return c.workspaceChange(ctx, http.MethodPost, workspacePath(name)+"/archive"+workspaceQuery("dir", dir), tarData, "application/x-tar")
}

// RemoveWorkspaceFile deletes a file or a folder with what it holds (a
// new version).
func (c *Client) RemoveWorkspaceFile(ctx context.Context, name, path string) (*WorkspaceCommit, error) {
	return c.workspaceChange(ctx, http.MethodDelete, workspaceFilePath(name, path), nil, "")
}

// OpenWorkspaceFile opens one file of a version (WorkspaceHead for the
// current one); the caller reads and closes it. The client's timeout
// bounds the whole download, until Close.
func (c *Client) OpenWorkspaceFile(ctx context.Context, name, path string, version int64) (io.ReadCloser, error) {
	return c.open(ctx, workspaceFilePath(name, path)+workspaceQuery("version", versionParam(version)))
}

// WorkspaceArchive opens a tar of the folder dir ("" for all) of a
// version; the caller reads and closes it.
func (c *Client) WorkspaceArchive(ctx context.Context, name, dir string, version int64) (io.ReadCloser, error) {
	return c.open(ctx, workspacePath(name)+"/archive"+workspaceQuery("dir", dir, "version", versionParam(version)))
}

// workspaceChange sends body (nil for none) and decodes the commit.
func (c *Client) workspaceChange(ctx context.Context, method, path string, body io.Reader, contentType string) (*WorkspaceCommit, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, body, contentType)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out WorkspaceCommit
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s %s: decoding response: %w", method, path, err)
	}
	return &out, nil
}

// open opens the body of GET path; the client's timeout bounds it until
// Close.
func (c *Client) open(ctx context.Context, path string) (io.ReadCloser, error) {
	cancel := context.CancelFunc(func() {})
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "*/*")
	resp, err := c.send(req)
	if err != nil {
		cancel()
		return nil, err
	}
	return &download{ReadCloser: resp.Body, cancel: cancel}, nil
}
