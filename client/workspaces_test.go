package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// Each workspace call sends the request the server's routes expect
// (method, escaped path, query, body) and decodes its answer.
func TestWorkspaceCalls(t *testing.T) {
	const commit = `{"version":3,"base":2,"changed":true,"added":1,"modified":0,"deleted":0,
		"conflicts":[{"path":"a.txt","kept_as":"a.txt.conflict-3","reason":"changed by version 3"}],
		"refused":[{"path":"dev","reason":"a device"}]}`
	wantCommit := &WorkspaceCommit{Version: 3, Base: 2, Changed: true, Added: 1,
		Conflicts: []WorkspaceConflict{{Path: "a.txt", KeptAs: "a.txt.conflict-3", Reason: "changed by version 3"}},
		Refused:   []WorkspaceRefused{{Path: "dev", Reason: "a device"}}}
	ctx := context.Background()
	cases := []struct {
		name, answer        string
		status              int
		call                func(c *Client) (any, error)
		method, path, query string
		body                string
		want                any
	}{
		{name: "create", status: 201, answer: `{"owner":"a","name":"proj","quota_bytes":16777216,"version":0}`,
			call:   func(c *Client) (any, error) { return c.CreateWorkspace(ctx, "proj", 16) },
			method: "POST", path: "/api/v1/workspaces", body: `{"name":"proj","quota_mb":16}`,
			want: &Workspace{Owner: "a", Name: "proj", QuotaBytes: 16 << 20}},
		{name: "list", status: 200, answer: `{"workspaces":[{"name":"proj","version":2,"files":3,"bytes":10}]}`,
			call:   func(c *Client) (any, error) { return c.ListWorkspaces(ctx) },
			method: "GET", path: "/api/v1/workspaces",
			want: []Workspace{{Name: "proj", Version: 2, Files: 3, Bytes: 10}}},
		{name: "list every key's", status: 200, answer: `{"workspaces":[{"owner":"b","name":"proj"}]}`,
			call:   func(c *Client) (any, error) { return c.ListAllWorkspaces(ctx) },
			method: "GET", path: "/api/v1/workspaces", query: "all=true",
			want: []Workspace{{Owner: "b", Name: "proj"}}},
		{name: "files of another key's workspace", status: 200, answer: `{"files":[]}`,
			call:   func(c *Client) (any, error) { return c.WorkspaceFilesOf(ctx, "team-b", "proj", "data", WorkspaceHead) },
			method: "GET", path: "/api/v1/workspaces/proj/files", query: "dir=data&owner=team-b", want: []WorkspaceFile{}},
		{name: "get", status: 200, answer: `{"name":"proj","version":2}`,
			call:   func(c *Client) (any, error) { return c.GetWorkspace(ctx, "proj") },
			method: "GET", path: "/api/v1/workspaces/proj", want: &Workspace{Name: "proj", Version: 2}},
		{name: "delete", status: 204,
			call:   func(c *Client) (any, error) { return nil, c.DeleteWorkspace(ctx, "proj") },
			method: "DELETE", path: "/api/v1/workspaces/proj"},
		{name: "versions", status: 200, answer: `{"versions":[{"number":0,"source":"create"},{"number":1,"parent":0,"source":"upload","files":2}]}`,
			call:   func(c *Client) (any, error) { return c.WorkspaceVersions(ctx, "proj") },
			method: "GET", path: "/api/v1/workspaces/proj/versions",
			want: []WorkspaceVersion{{Number: 0, Source: "create"}, {Number: 1, Source: "upload", Files: 2}}},
		{name: "restore", status: 200, answer: commit,
			call:   func(c *Client) (any, error) { return c.RestoreWorkspace(ctx, "proj", 1) },
			method: "POST", path: "/api/v1/workspaces/proj/restore", body: `{"version":1}`, want: wantCommit},
		{name: "files of a folder at a version", status: 200,
			answer: `{"files":[{"path":"data/x.csv","type":"file","size":5,"mode":420,"sha256":"ab"},{"path":"data/l","type":"symlink","target":"x.csv"}]}`,
			call:   func(c *Client) (any, error) { return c.WorkspaceFiles(ctx, "proj", "data", 1) },
			method: "GET", path: "/api/v1/workspaces/proj/files", query: "dir=data&version=1",
			want: []WorkspaceFile{{Path: "data/x.csv", Type: "file", Size: 5, Mode: 0o644, SHA256: "ab"}, {Path: "data/l", Type: "symlink", Target: "x.csv"}}},
		{name: "files of the current version", status: 200, answer: `{"files":[]}`,
			call:   func(c *Client) (any, error) { return c.WorkspaceFiles(ctx, "proj", "", WorkspaceHead) },
			method: "GET", path: "/api/v1/workspaces/proj/files", want: []WorkspaceFile{}},
		{name: "write a file, path escaped", status: 200, answer: commit,
			call: func(c *Client) (any, error) {
				return c.WriteWorkspaceFile(ctx, "proj", "/notes/a b#1.txt", strings.NewReader("hello"))
			},
			method: "PUT", path: "/api/v1/workspaces/proj/files/notes/a b#1.txt", body: "hello", want: wantCommit},
		{name: "upload a tar into a folder", status: 200, answer: commit,
			call: func(c *Client) (any, error) {
				return c.UploadWorkspace(ctx, "proj", "src", strings.NewReader("TAR"))
			},
			method: "POST", path: "/api/v1/workspaces/proj/archive", query: "dir=src", body: "TAR", want: wantCommit},
		{name: "remove", status: 200, answer: commit,
			call:   func(c *Client) (any, error) { return c.RemoveWorkspaceFile(ctx, "proj", "src") },
			method: "DELETE", path: "/api/v1/workspaces/proj/files/src", want: wantCommit},
		{name: "download a file at a version", status: 200, answer: "file bytes",
			call:   func(c *Client) (any, error) { return readAll(c.OpenWorkspaceFile(ctx, "proj", "data/x.csv", 2)) },
			method: "GET", path: "/api/v1/workspaces/proj/files/data/x.csv", query: "version=2", want: "file bytes"},
		{name: "download a tar of a folder", status: 200, answer: "tar bytes",
			call:   func(c *Client) (any, error) { return readAll(c.WorkspaceArchive(ctx, "proj", "data", WorkspaceHead)) },
			method: "GET", path: "/api/v1/workspaces/proj/archive", query: "dir=data", want: "tar bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, seen := fakeServer(t, tc.status, tc.answer, nil)
			got, err := tc.call(New(srv.URL, WithAPIKey("k")))
			if err != nil {
				t.Fatal(err)
			}
			rec := (*seen)[0]
			if rec.method != tc.method || rec.path != tc.path || rec.query != tc.query || string(rec.body) != tc.body {
				t.Errorf("sent %s %s ?%s %q, want %s %s ?%s %q", rec.method, rec.path, rec.query, rec.body, tc.method, tc.path, tc.query, tc.body)
			}
			if rec.header.Get("Authorization") != "Bearer k" {
				t.Errorf("Authorization %q", rec.header.Get("Authorization"))
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func readAll(rc io.ReadCloser, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// Another key's workspace is a 404 like an unknown one: an *APIError, for
// reads and for downloads alike.
func TestWorkspaceNotFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"status":404,"title":"Not Found","detail":"workspace or file not found"}`)
	}))
	defer srv.Close()
	c := New(srv.URL)
	_, err1 := c.GetWorkspace(context.Background(), "theirs")
	_, err2 := c.OpenWorkspaceFile(context.Background(), "theirs", "a.txt", WorkspaceHead)
	_, err3 := c.UploadWorkspace(context.Background(), "theirs", "", strings.NewReader(""))
	for i, err := range []error{err1, err2, err3} {
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != 404 || !strings.Contains(ae.Error(), "workspace or file not found") {
			t.Errorf("call %d: %v, want a 404 *APIError", i, err)
		}
	}
}

// A run's and a session's workspace travel in config and the session's
// request; the result's commit is decoded.
func TestWorkspaceOnRunsAndSessions(t *testing.T) {
	srv, seen := fakeServer(t, http.StatusOK, `{"execution_id":"exe_1","status":"completed",
		"workspace":{"name":"proj","mode":"rw","version":4,"base":3,"changed":true,"added":2}}`, nil)
	c := New(srv.URL)
	res, err := c.Eval(context.Background(), &SimpleExecRequest{Code: "1", Config: &ExecutionConfig{Workspace: "proj", WorkspaceMode: "ro"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &WorkspaceOutcome{Name: "proj", Mode: "rw", WorkspaceCommit: WorkspaceCommit{Version: 4, Base: 3, Changed: true, Added: 2}}
	if !reflect.DeepEqual(res.Workspace, want) {
		t.Errorf("workspace %+v, want %+v", res.Workspace, want)
	}
	if b := string((*seen)[0].body); !strings.Contains(b, `"config":{"workspace":"proj","workspace_mode":"ro"}`) {
		t.Errorf("eval body %s", b)
	}

	srv2, seen2 := fakeServer(t, http.StatusCreated, `{"session_id":"ses_1","state":"idle"}`, nil)
	if _, err := New(srv2.URL).CreateSession(context.Background(), &SessionRequest{Workspace: "proj"}); err != nil {
		t.Fatal(err)
	}
	if b := string((*seen2)[0].body); b != `{"workspace":"proj"}` {
		t.Errorf("session body %s", b)
	}
}
