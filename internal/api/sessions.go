package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/runner"
)

// SessionEngine is what the sessions endpoints need; the API serves them
// only when its engine implements it (*engine.Engine does). The caller
// scopes every call to the sessions of one API key (an operator key: all).
type SessionEngine interface {
	CreateSession(ctx context.Context, req engine.SessionRequest) (engine.Session, error)
	GetSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	ListSessions(ctx context.Context, c engine.Caller) []engine.Session
	DeleteSession(ctx context.Context, id string, c engine.Caller) error
	ExecuteCell(ctx context.Context, id string, c engine.Caller, req engine.CellRequest) (engine.CellResult, error)
	InterruptSession(ctx context.Context, id string, c engine.Caller) error
	RestartSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	PutSessionFile(ctx context.Context, id string, c engine.Caller, path string, data []byte) error
	ListSessionFiles(ctx context.Context, id string, c engine.Caller) ([]engine.SessionFile, error)
	ReadSessionFile(ctx context.Context, id string, c engine.Caller, path string) ([]byte, error)
}

var _ SessionEngine = (*engine.Engine)(nil)

// SessionRequest is the body of POST /api/v1/sessions.
type SessionRequest struct {
	PythonVersion      string            `json:"python_version,omitempty" doc:"e.g. 3.12; empty means the server default"`
	Requirements       string            `json:"requirements,omitempty" doc:"requirements.txt content installed into the session's environment"`
	EnvVars            map[string]string `json:"env_vars,omitempty" doc:"Added to the session's environment"`
	MemoryMB           int               `json:"memory_mb,omitempty" minimum:"0" doc:"Memory of the whole session (every cell) in MiB; 0 means the server default"`
	DiskMB             int               `json:"disk_mb,omitempty" minimum:"0" doc:"Workspace size in MiB; 0 means the server default"`
	CPUShares          int               `json:"cpu_shares,omitempty" minimum:"0" doc:"Relative CPU weight; 0 means the server default"`
	NetworkDisabled    *bool             `json:"network_disabled,omitempty" nullable:"true" doc:"Network is off unless this is explicitly false (or network is given) and the server allows network access; the session then has an egress of its own for its whole life, as an execution has (docs/network.md)"`
	Network            *NetworkConfig    `json:"network,omitempty" doc:"Network for this session, narrowed to these destinations (each must also be on the operator's list); implies network_disabled: false"`
	Secrets            []string          `json:"secrets,omitempty" maxItems:"32" doc:"Names of operator secrets (--secrets-file) for this session: its code gets an environment variable of each name holding a placeholder (new at each restart, resume and fork), which the egress replaces by the value in requests to the secret's hosts; needs network. An unknown name and one this API key may not use get the same 400"`
	IdleTimeoutSeconds int               `json:"idle_timeout_seconds,omitempty" minimum:"0" doc:"The session ends after this long without a cell; 0 means the server default"`
	MaxLifetimeSeconds int               `json:"max_lifetime_seconds,omitempty" minimum:"0" doc:"The session ends this long after its creation; 0 means the server default"`
	FigureFormat       string            `json:"figure_format,omitempty" enum:"png,svg" doc:"How matplotlib figures are returned"`
	MaxRows            int               `json:"max_rows,omitempty" minimum:"0" doc:"DataFrame rows kept in outputs"`
	Workspace          string            `json:"workspace,omitempty" doc:"A workspace of yours mounted at /workspace for the session's life; what the session leaves there is committed as its next version when the session ends"`
	WorkspaceMode      string            `json:"workspace_mode,omitempty" enum:"rw,ro" doc:"rw (default) or ro: the workspace mounted read-only"`
	FromSnapshot       string            `json:"from_snapshot,omitempty" doc:"Restore this snapshot of yours into the new session: its variables and its files in /work, its configuration where the other fields are left out"`
}

// SessionInfo describes a live session.
type SessionInfo struct {
	SessionID          string  `json:"session_id" example:"ses_0190f3a2-7c1e-7b2a-9f3e-2d4c5b6a7e8f"`
	State              string  `json:"state" enum:"idle,busy,hibernated" doc:"hibernated: saved without an interpreter after --session-hibernate-after idle; its next call resumes it"`
	PythonVersion      string  `json:"python_version"`
	Network            bool    `json:"network"`
	ExecutionCount     int     `json:"execution_count" doc:"Cells run since the session (or its last restart) started"`
	CreatedAt          Time    `json:"created_at"`
	LastActivity       Time    `json:"last_activity"`
	ExpiresAt          Time    `json:"expires_at" doc:"When the session's max lifetime ends"`
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds"`
	MemoryBytes        int64   `json:"memory_bytes" doc:"Memory in use now by every process of the session"`
	MemoryLimitBytes   int64   `json:"memory_limit_bytes"`
	DiskLimitBytes     int64   `json:"disk_limit_bytes"`
	Restarts           int     `json:"restarts"`
	FromSnapshot       string  `json:"from_snapshot,omitempty" doc:"The snapshot the session was restored from"`
	ForkedFrom         string  `json:"forked_from,omitempty" doc:"The session this one was forked from"`
	// Skipped is on the answer of a restore or a fork only.
	Skipped []runner.Skipped `json:"skipped,omitempty" doc:"Variables the restore or fork could not load (a module the session's environment lacks), each with why"`
}

func newSessionInfo(s engine.Session) SessionInfo {
	return SessionInfo{SessionID: s.ID, State: string(s.State), PythonVersion: s.PythonVersion, Network: s.Network,
		ExecutionCount: s.ExecutionCount, CreatedAt: wireTime(s.CreatedAt), LastActivity: wireTime(s.LastActivity), ExpiresAt: wireTime(s.ExpiresAt),
		IdleTimeoutSeconds: s.IdleTimeout.Seconds(), MemoryBytes: s.MemoryBytes, MemoryLimitBytes: s.MemoryLimit,
		DiskLimitBytes: s.DiskLimit, Restarts: s.Restarts, FromSnapshot: s.FromSnapshot, ForkedFrom: s.ForkedFrom, Skipped: s.Skipped}
}

// CellRequest is the body of POST /api/v1/sessions/{id}/execute.
type CellRequest struct {
	Code           string `json:"code" maxLength:"10485760" doc:"Python source of the cell"`
	EvalLastExpr   *bool  `json:"eval_last_expr,omitempty" nullable:"true" doc:"Return the value of a trailing expression as result (default true, as in a notebook)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" minimum:"0" doc:"The cell is interrupted after this long; 0 means the server default. A cell that does not yield to the interrupt ends the session"`
}

// CellResult is an ExecutionResult plus the session's counters.
type CellResult struct {
	ExecutionResult
	SessionID      string        `json:"session_id"`
	ExecutionCount int           `json:"execution_count" doc:"This cell's number in the session"`
	SessionEnded   bool          `json:"session_ended,omitempty" doc:"The session did not survive this cell"`
	Resumed        bool          `json:"resumed,omitempty" doc:"The session was hibernated and resumed for this cell"`
	RestoredFrom   *RestoredFrom `json:"restored_from,omitempty" doc:"On the first cell of a session whose node was lost: the checkpoint it resumed from, and how many cells ran after it (their effects are gone)"`
}

// SessionList is GET /api/v1/sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

type sessionIDInput struct {
	ID string `path:"id" doc:"Session id"`
}

type cellInput struct {
	ID   string `path:"id" doc:"Session id"`
	Body CellRequest
}

type sessionOutput struct{ Body SessionInfo }

type createSessionInput struct {
	Accept string `header:"Accept" doc:"text/event-stream for install progress while the session's environment is built"`
	Body   SessionRequest
}

// runsCodeForbidden documents the 403 of the routes that run code in a
// session or change what it runs (the engine's sessionToRun).
const runsCodeForbidden = "403 for an operator key in another key's session that holds secrets the operator's key may not use: the egress would inject them into code the operator wrote."

func (s *Server) registerSessions(hapi huma.API, mux *http.ServeMux, se SessionEngine) {
	errs := []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError}
	// A session that is restarting or ending answers 409, one whose
	// interpreter died 410.
	liveErrs := append(slices.Clone(errs), http.StatusConflict, http.StatusGone)
	tag := func(o huma.Operation) huma.Operation {
		o.Tags = []string{"sessions"}
		return o
	}
	o := tag(op(hapi, "create-session", http.MethodPost, "/api/v1/sessions", "Create a stateful session",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusNotImplemented, http.StatusServiceUnavailable))
	o.DefaultStatus = http.StatusCreated
	o.Description = "One jail and one interpreter for the session's whole life: variables, imports, files and the working directory persist between cells. Sessions live in the memory of the node that holds them and end when it restarts; on a fleet any node serves them, and a session whose node is gone answers 410 with the reason (node_lost, node_shutdown). " +
		"With `from_snapshot` the session is restored from one of the key's snapshots (POST /api/v1/sessions/{id}/snapshot), on any node: its variables and files, and the snapshot's configuration where the request leaves a field out; another key's snapshot is 404. " +
		"The session runs in the base environment, with `requirements` layered over it. With `Accept: text/event-stream` the answer is 200 and a stream: `install` events while the environment is built, then one `session` event (the session) or one `error` event (`{\"error\", \"status\"}`: the status the plain call would have answered)."
	s.documentCreateSession(hapi, &o)
	huma.Register(hapi, o, func(ctx context.Context, in *createSessionInput) (*huma.StreamResponse, error) {
		req, err := s.sessionRequest(ctx, in.Body)
		if err != nil {
			return nil, err
		}
		if strings.Contains(in.Accept, sseType) {
			return &huma.StreamResponse{Body: func(hctx huma.Context) { s.createSessionStream(hctx, se, req) }}, nil
		}
		info, err := se.CreateSession(ctx, req)
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			writeJSON(hctx, http.StatusCreated, newSessionInfo(info))
		}}, nil
	})

	o = tag(op(hapi, "list-sessions", http.MethodGet, "/api/v1/sessions", "List your live sessions", errs...))
	huma.Register(hapi, o, func(ctx context.Context, _ *struct{}) (*struct{ Body SessionList }, error) {
		list := se.ListSessions(ctx, callerFrom(ctx).engine())
		out := &struct{ Body SessionList }{Body: SessionList{Sessions: make([]SessionInfo, len(list))}}
		for i, x := range list {
			out.Body.Sessions[i] = newSessionInfo(x)
		}
		return out, nil
	})

	o = tag(op(hapi, "get-session", http.MethodGet, "/api/v1/sessions/{id}", "Get a session (state, last activity, memory in use)", liveErrs...))
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
		info, err := se.GetSession(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &sessionOutput{Body: newSessionInfo(info)}, nil
	})

	o = tag(op(hapi, "delete-session", http.MethodDelete, "/api/v1/sessions/{id}", "End a session and remove its files", liveErrs...))
	o.DefaultStatus = http.StatusNoContent
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*struct{}, error) {
		if err := se.DeleteSession(ctx, in.ID, callerFrom(ctx).engine()); err != nil {
			return nil, sessionError(s, err)
		}
		return nil, nil
	})

	o = tag(op(hapi, "execute-cell", http.MethodPost, "/api/v1/sessions/{id}/execute", "Run a cell in a session",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusGone, http.StatusInternalServerError))
	o.Description = "The result has the ExecutionResult shape plus execution_count. A Python exception is status completed with exit_code 1; a timed-out cell is interrupted and reported failed with reason timeout. " + runsCodeForbidden
	huma.Register(hapi, o, func(ctx context.Context, in *cellInput) (*struct{ Body CellResult }, error) {
		eval := in.Body.EvalLastExpr == nil || *in.Body.EvalLastExpr
		res, err := se.ExecuteCell(ctx, in.ID, callerFrom(ctx).engine(), engine.CellRequest{Code: in.Body.Code, EvalLastExpr: eval,
			Timeout: time.Duration(in.Body.TimeoutSeconds) * time.Second})
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &struct{ Body CellResult }{Body: CellResult{ExecutionResult: newResult(&res.Execution), SessionID: res.SessionID,
			ExecutionCount: res.ExecutionCount, SessionEnded: res.SessionEnded, Resumed: res.Resumed,
			RestoredFrom: restoredFrom(res.RestoredFrom)}}, nil
	})

	o = tag(op(hapi, "interrupt-session", http.MethodPost, "/api/v1/sessions/{id}/interrupt", "Interrupt the running cell (KeyboardInterrupt); the session survives", liveErrs...))
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
		if err := se.InterruptSession(ctx, in.ID, callerFrom(ctx).engine()); err != nil {
			return nil, sessionError(s, err)
		}
		info, err := se.GetSession(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &sessionOutput{Body: newSessionInfo(info)}, nil
	})

	o = tag(op(hapi, "restart-session", http.MethodPost, "/api/v1/sessions/{id}/restart", "Restart the interpreter: variables cleared, files kept",
		append(liveErrs, http.StatusForbidden)...))
	o.Description = "409 also when the workspace's files add up to more than the session's disk limit (a sparse file counts at its full size): the session keeps its interpreter. " + runsCodeForbidden
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*sessionOutput, error) {
		info, err := se.RestartSession(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &sessionOutput{Body: newSessionInfo(info)}, nil
	})

	o = tag(op(hapi, "list-session-files", http.MethodGet, "/api/v1/sessions/{id}/files", "List the files of a session's workspace", liveErrs...))
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*struct {
		Body struct {
			Files []engine.SessionFile `json:"files"`
		}
	}, error) {
		files, err := se.ListSessionFiles(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		out := &struct {
			Body struct {
				Files []engine.SessionFile `json:"files"`
			}
		}{}
		out.Body.Files = files
		return out, nil
	})
	s.registerSessionFiles(mux, se)
	if ne, ok := se.(SnapshotEngine); ok {
		s.registerSnapshots(hapi, ne)
	}
}

// sessionRequest turns the wire request into the engine's.
func (s *Server) sessionRequest(ctx context.Context, in SessionRequest) (engine.SessionRequest, error) {
	// A session has network only when it asks: the operator's default
	// for executions does not apply.
	network, allow, err := s.limits.networkOf(false, in.NetworkDisabled, in.Network, "network")
	if err != nil {
		return engine.SessionRequest{}, err
	}
	req := engine.SessionRequest{NetworkAllow: allow, Secrets: in.Secrets,
		PythonVersion: in.PythonVersion, Requirements: in.Requirements,
		MemoryBytes: int64(in.MemoryMB) << 20, DiskBytes: int64(in.DiskMB) << 20, CPUShares: in.CPUShares, Network: network,
		IdleTimeout: time.Duration(in.IdleTimeoutSeconds) * time.Second, MaxLifetime: time.Duration(in.MaxLifetimeSeconds) * time.Second,
		FigureFormat: in.FigureFormat, MaxRows: in.MaxRows, FromSnapshot: in.FromSnapshot, Caller: callerFrom(ctx).Name,
		Workspace: in.Workspace, WorkspaceMode: in.WorkspaceMode,
	}
	for k, v := range in.EnvVars {
		req.Env = append(req.Env, k+"="+v)
	}
	return req, nil
}

// sessionError maps the engine's session errors, then the general ones.
func sessionError(s *Server, err error) error {
	switch {
	case errors.Is(err, engine.ErrSessionNotFound):
		return errorf(http.StatusNotFound, "session not found")
	case errors.Is(err, engine.ErrSessionBusy), errors.Is(err, engine.ErrSessionWorkspaceTooLarge):
		return errorf(http.StatusConflict, "%s", err)
	case errors.Is(err, engine.ErrSessionSecrets):
		return errorf(http.StatusForbidden, "%s", err)
	case errors.Is(err, engine.ErrSessionEnded): // before a fork's: a session that ended did not stay as it was
		return errorf(http.StatusGone, "%s", err)
	case errors.Is(err, engine.ErrSessionForkEnded):
		return errorf(http.StatusConflict, "%s", err)
	case errors.Is(err, engine.ErrTooManySessions):
		return errorf(http.StatusTooManyRequests, "%s", err)
	case errors.Is(err, engine.ErrSessionsDisabled):
		return errorf(http.StatusNotImplemented, "%s", err)
	case errors.Is(err, engine.ErrFileNotFound):
		return errorf(http.StatusNotFound, "%s", err)
	}
	if e, ok := snapshotError(err); ok {
		return e
	}
	return engineError(s.log, err)
}

// RestoredFrom is the checkpoint a session resumed from after its node was
// lost.
type RestoredFrom struct {
	SnapshotID               string `json:"snapshot_id" doc:"The checkpoint (a server-owned snapshot, deleted once resumed)"`
	CellsLost                int    `json:"cells_lost" doc:"Cells run after the checkpoint, whose effects are gone (a cell answered just before the node was lost may be missing from it)"`
	CheckpointExecutionCount int    `json:"checkpoint_execution_count" doc:"The session's execution count at the checkpoint: every cell numbered above it before this one is lost, and this cell is numbered from it"`
}

func restoredFrom(r *engine.RestoredFrom) *RestoredFrom {
	if r == nil {
		return nil
	}
	return &RestoredFrom{SnapshotID: r.SnapshotID, CellsLost: r.CellsLost, CheckpointExecutionCount: r.CheckpointExecutionCount}
}
