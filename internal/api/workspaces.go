package api

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// WorkspaceEngine is what the workspace endpoints need; the API serves
// them only when its engine implements it (*engine.Engine does). Every
// call takes the caller: another key's workspace is
// engine.ErrWorkspaceNotFound, as an unknown one (docs/workspaces.md).
type WorkspaceEngine interface {
	CreateWorkspace(ctx context.Context, c engine.Caller, name string, quotaBytes int64) (engine.WorkspaceInfo, error)
	Workspace(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef) (engine.WorkspaceInfo, error)
	Workspaces(ctx context.Context, c engine.Caller, all bool) ([]engine.WorkspaceInfo, error)
	DeleteWorkspace(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef) error
	WorkspaceVersions(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef) ([]engine.WorkspaceVersion, error)
	RestoreWorkspace(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, n int64) (engine.WorkspaceCommit, error)
	WorkspaceFiles(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, n int64, dir string) ([]engine.WorkspaceFile, error)
	OpenWorkspaceFile(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, n int64, path string) (io.ReadCloser, engine.WorkspaceFile, error)
	TarWorkspace(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, n int64, dir string, w io.Writer) error
	WriteWorkspaceFile(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, path string, r io.Reader, mode fs.FileMode, maxBytes int64) (engine.WorkspaceCommit, error)
	UploadWorkspace(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, dir string, r io.Reader, lim engine.WorkspaceLimits) (engine.WorkspaceCommit, error)
	RemoveWorkspaceFile(ctx context.Context, c engine.Caller, ref engine.WorkspaceRef, path string) (engine.WorkspaceCommit, error)
}

var _ WorkspaceEngine = (*engine.Engine)(nil)

// WorkspaceRequest is the body of POST /api/v1/workspaces.
type WorkspaceRequest struct {
	Name    string `json:"name" doc:"1 to 64 letters, digits, '-' and '_', starting with a letter or digit; unique among your workspaces"`
	QuotaMB int    `json:"quota_mb,omitempty" minimum:"0" doc:"Most the workspace may hold, in MiB; 0 means the server default"`
}

// WorkspaceList is GET /api/v1/workspaces.
type WorkspaceList struct {
	Workspaces []engine.WorkspaceInfo `json:"workspaces"`
}

// WorkspaceFile is one entry of a workspace's listing (a type of its own:
// the document names it apart from a session's files).
type WorkspaceFile engine.WorkspaceFile

type workspaceInput struct {
	Name  string `path:"name" doc:"Workspace name"`
	Owner string `query:"owner" doc:"The key that owns the workspace (operator keys only; default: yours)"`
}

func (in workspaceInput) ref() engine.WorkspaceRef {
	return engine.WorkspaceRef{Owner: in.Owner, Name: in.Name}
}

func (in workspaceFilesInput) ref() engine.WorkspaceRef {
	return engine.WorkspaceRef{Owner: in.Owner, Name: in.Name}
}

func (in restoreInput) ref() engine.WorkspaceRef {
	return engine.WorkspaceRef{Owner: in.Owner, Name: in.Name}
}

type workspaceFilesInput struct {
	Name    string `path:"name" doc:"Workspace name"`
	Owner   string `query:"owner" doc:"The key that owns the workspace (operator keys only; default: yours)"`
	Dir     string `query:"dir" doc:"A folder of the workspace; empty for all of it"`
	Version int64  `query:"version" default:"-1" minimum:"-1" doc:"A kept version; -1 (the default) is the current one"`
}

type restoreInput struct {
	Name  string `path:"name" doc:"Workspace name"`
	Owner string `query:"owner" doc:"The key that owns the workspace (operator keys only; default: yours)"`
	Body  struct {
		Version int64 `json:"version" minimum:"0" doc:"The kept version to restore"`
	}
}

func (s *Server) registerWorkspaces(hapi huma.API, mux *http.ServeMux, we WorkspaceEngine) {
	// 400: a name that is not a workspace's, or a query that does not parse.
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError, http.StatusNotImplemented}
	tag := func(o huma.Operation) huma.Operation {
		o.Tags = []string{"workspaces"}
		return o
	}
	o := tag(op(hapi, "create-workspace", http.MethodPost, "/api/v1/workspaces", "Create a workspace",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusConflict, http.StatusRequestEntityTooLarge,
		http.StatusInternalServerError, http.StatusNotImplemented))
	o.DefaultStatus = http.StatusCreated
	o.Description = "An empty workspace (version 0) of yours. Runs name it in config.workspace and mount it at /workspace; what they leave there is committed as its next version (docs/workspaces.md). 409 when you have one of that name, 413 beyond the server's quota or count of workspaces, 501 when this server's jails cannot mount workspaces (the message says why)."
	huma.Register(hapi, o, func(ctx context.Context, in *struct{ Body WorkspaceRequest }) (*struct{ Body engine.WorkspaceInfo }, error) {
		if in.Body.QuotaMB < 0 {
			return nil, errorf(http.StatusBadRequest, "quota_mb must not be negative")
		}
		info, err := we.CreateWorkspace(ctx, callerFrom(ctx).engine(), in.Body.Name, int64(in.Body.QuotaMB)<<20)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &struct{ Body engine.WorkspaceInfo }{Body: info}, nil
	})

	o = tag(op(hapi, "list-workspaces", http.MethodGet, "/api/v1/workspaces", "List your workspaces", errs...))
	huma.Register(hapi, o, func(ctx context.Context, in *struct {
		All bool `query:"all" doc:"Every key's workspaces (operator keys only; 400 from another key)"`
	}) (*struct{ Body WorkspaceList }, error) {
		list, err := we.Workspaces(ctx, callerFrom(ctx).engine(), in.All)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		if list == nil {
			list = []engine.WorkspaceInfo{}
		}
		return &struct{ Body WorkspaceList }{Body: WorkspaceList{Workspaces: list}}, nil
	})

	o = tag(op(hapi, "get-workspace", http.MethodGet, "/api/v1/workspaces/{name}", "Get a workspace (version, bytes, files)", errs...))
	huma.Register(hapi, o, func(ctx context.Context, in *workspaceInput) (*struct{ Body engine.WorkspaceInfo }, error) {
		info, err := we.Workspace(ctx, callerFrom(ctx).engine(), in.ref())
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &struct{ Body engine.WorkspaceInfo }{Body: info}, nil
	})

	o = tag(op(hapi, "delete-workspace", http.MethodDelete, "/api/v1/workspaces/{name}", "Delete a workspace and its versions", errs...))
	o.DefaultStatus = http.StatusNoContent
	huma.Register(hapi, o, func(ctx context.Context, in *workspaceInput) (*struct{}, error) {
		if err := we.DeleteWorkspace(ctx, callerFrom(ctx).engine(), in.ref()); err != nil {
			return nil, engineError(s.log, err)
		}
		return nil, nil
	})

	o = tag(op(hapi, "list-workspace-versions", http.MethodGet, "/api/v1/workspaces/{name}/versions", "List the kept versions of a workspace, oldest first", errs...))
	huma.Register(hapi, o, func(ctx context.Context, in *workspaceInput) (*struct {
		Body struct {
			Versions []engine.WorkspaceVersion `json:"versions"`
		}
	}, error) {
		vs, err := we.WorkspaceVersions(ctx, callerFrom(ctx).engine(), in.ref())
		if err != nil {
			return nil, engineError(s.log, err)
		}
		out := &struct {
			Body struct {
				Versions []engine.WorkspaceVersion `json:"versions"`
			}
		}{}
		out.Body.Versions = vs
		return out, nil
	})

	o = tag(op(hapi, "restore-workspace", http.MethodPost, "/api/v1/workspaces/{name}/restore", "Make a kept version the workspace's next one",
		append(errs, http.StatusBadRequest, http.StatusRequestEntityTooLarge)...))
	huma.Register(hapi, o, func(ctx context.Context, in *restoreInput) (*struct{ Body engine.WorkspaceCommit }, error) {
		c, err := we.RestoreWorkspace(ctx, callerFrom(ctx).engine(), in.ref(), in.Body.Version)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		return &struct{ Body engine.WorkspaceCommit }{Body: c}, nil
	})

	o = tag(op(hapi, "list-workspace-files", http.MethodGet, "/api/v1/workspaces/{name}/files", "List the files of a workspace",
		append(errs, http.StatusBadRequest)...))
	huma.Register(hapi, o, func(ctx context.Context, in *workspaceFilesInput) (*struct {
		Body struct {
			Files []WorkspaceFile `json:"files"`
		}
	}, error) {
		files, err := we.WorkspaceFiles(ctx, callerFrom(ctx).engine(), in.ref(), in.Version, in.Dir)
		if err != nil {
			return nil, engineError(s.log, err)
		}
		out := &struct {
			Body struct {
				Files []WorkspaceFile `json:"files"`
			}
		}{}
		out.Body.Files = make([]WorkspaceFile, len(files))
		for i, f := range files {
			out.Body.Files[i] = WorkspaceFile(f)
		}
		return out, nil
	})
	s.registerWorkspaceFiles(mux, we)
}

// workspaceVersion reads the version query parameter: absent is the
// current version, empty is an error (as on the routes huma serves).
func workspaceVersion(r *http.Request) (int64, error) {
	vs, ok := r.URL.Query()["version"]
	if !ok {
		return engine.WorkspaceHead, nil
	}
	v := vs[0]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < engine.WorkspaceHead {
		return 0, errorf(http.StatusBadRequest, "version must be a version number, got %q", v)
	}
	return n, nil
}

// workspaceStatus maps the engine's workspace errors; nil for others.
// The message of a missing workspace is the same whoever owns it.
func workspaceStatus(err error) *Error {
	switch {
	case errors.Is(err, engine.ErrWorkspaceNotFound):
		return errorf(http.StatusNotFound, "workspace or file not found")
	case errors.Is(err, engine.ErrWorkspaceExists):
		return errorf(http.StatusConflict, "%s", err)
	case errors.Is(err, engine.ErrWorkspaceQuota), errors.Is(err, engine.ErrWorkspaceLimit):
		return errorf(http.StatusRequestEntityTooLarge, "%s", err)
	case errors.Is(err, engine.ErrWorkspaceInvalid):
		return errorf(http.StatusBadRequest, "%s", err)
	case errors.Is(err, engine.ErrWorkspaceUnsupported):
		return errorf(http.StatusNotImplemented, "%s", err)
	}
	return nil
}
