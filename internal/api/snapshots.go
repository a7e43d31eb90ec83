package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/runner"
)

// SnapshotEngine is what the snapshot endpoints need, beside the sessions'
// (a restore is a create with from_snapshot); the API serves them when
// its session engine implements it (*engine.Engine and a fleet's router
// do). Snapshots belong to the key whose session they were made of.
type SnapshotEngine interface {
	SnapshotSession(ctx context.Context, id string, c engine.Caller) (engine.SessionSaved, error)
	ForkSession(ctx context.Context, id string, c engine.Caller) (engine.Session, error)
	ListSnapshots(ctx context.Context, c engine.Caller) ([]engine.SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, id string, c engine.Caller) error
}

var _ SnapshotEngine = (*engine.Engine)(nil)

// SnapshotSaved is the answer of POST /api/v1/sessions/{id}/snapshot.
type SnapshotSaved struct {
	SnapshotID     string           `json:"snapshot_id" example:"snap_5f0c1e2d3a4b5c6d7e8f9a0b"`
	Bytes          int64            `json:"bytes" doc:"Size of the stored snapshot: state, workspace files and header"`
	ExecutionCount int              `json:"execution_count" doc:"The session's cells when it was saved; a restored session counts on from it"`
	Saved          []string         `json:"saved" doc:"The variables saved"`
	Skipped        []runner.Skipped `json:"skipped" doc:"The variables left out, each with why (a thread, an open socket, what pickle refused)"`
}

// SnapshotList is GET /api/v1/snapshots.
type SnapshotList struct {
	Snapshots []SnapshotInfo `json:"snapshots"`
}

// SnapshotInfo describes a stored snapshot.
type SnapshotInfo struct {
	SnapshotID     string           `json:"snapshot_id"`
	SessionID      string           `json:"session_id" doc:"The session it was made of"`
	Bytes          int64            `json:"bytes"`
	CreatedAt      Time             `json:"created_at"`
	PythonVersion  string           `json:"python_version"`
	ExecutionCount int              `json:"execution_count"`
	Skipped        []runner.Skipped `json:"skipped"`
}

type snapshotIDInput struct {
	ID string `path:"id" doc:"Snapshot id"`
}

func (s *Server) registerSnapshots(hapi huma.API, ne SnapshotEngine) {
	tag := func(o huma.Operation) huma.Operation {
		o.Tags = []string{"snapshots"}
		return o
	}
	liveErrs := []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusGone,
		http.StatusInternalServerError, http.StatusNotImplemented}
	o := tag(op(hapi, "snapshot-session", http.MethodPost, "/api/v1/sessions/{id}/snapshot", "Save a session's state as a snapshot",
		append(liveErrs, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests)...))
	o.DefaultStatus = http.StatusCreated
	o.Description = "Saves the session's variables, imported modules, functions and classes, and its workspace files, into the server's store, where any node of a fleet reads it. The snapshot belongs to the session's API key; restore it with POST /api/v1/sessions and `from_snapshot`. " +
		"A variable that cannot be saved (a thread, an open file or socket, a generator) is left out and named in `skipped`. 409 while a cell runs; 413 over the size cap; 429 over the key's quota."
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*struct{ Body SnapshotSaved }, error) {
		saved, err := ne.SnapshotSession(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &struct{ Body SnapshotSaved }{Body: SnapshotSaved{SnapshotID: saved.ID, Bytes: saved.Bytes,
			ExecutionCount: saved.ExecutionCount, Saved: saved.Saved, Skipped: saved.Skipped}}, nil
	})

	o = tag(op(hapi, "fork-session", http.MethodPost, "/api/v1/sessions/{id}/fork", "Fork a session: a new session with a copy of its state",
		append(liveErrs, http.StatusTooManyRequests, http.StatusForbidden)...))
	o.DefaultStatus = http.StatusCreated
	o.Description = "A new session of the same key and configuration, in a new jail, holding a copy of the session's variables and workspace files; the two then diverge. It lives on the parent's node. 409 while a cell of the parent runs, when its workspace's files add up to more than its disk limit, and when the fork's interpreter ended while loading the state (an object whose unpickling exits or crashes the process, or needs more than the session's memory; the message says how it ended): no fork is left, and the session keeps its interpreter and its variables. " + runsCodeForbidden
	huma.Register(hapi, o, func(ctx context.Context, in *sessionIDInput) (*struct{ Body SessionInfo }, error) {
		info, err := ne.ForkSession(ctx, in.ID, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		return &struct{ Body SessionInfo }{Body: newSessionInfo(info)}, nil
	})

	o = tag(op(hapi, "list-snapshots", http.MethodGet, "/api/v1/snapshots", "List your snapshots",
		http.StatusUnauthorized, http.StatusInternalServerError, http.StatusNotImplemented))
	huma.Register(hapi, o, func(ctx context.Context, _ *struct{}) (*struct{ Body SnapshotList }, error) {
		list, err := ne.ListSnapshots(ctx, callerFrom(ctx).engine())
		if err != nil {
			return nil, sessionError(s, err)
		}
		out := &struct{ Body SnapshotList }{Body: SnapshotList{Snapshots: make([]SnapshotInfo, len(list))}}
		for i, x := range list {
			out.Body.Snapshots[i] = SnapshotInfo{SnapshotID: x.ID, SessionID: x.SessionID, Bytes: x.Bytes,
				CreatedAt: wireTime(x.CreatedAt), PythonVersion: x.PythonVersion, ExecutionCount: x.ExecutionCount, Skipped: x.Skipped}
		}
		return out, nil
	})

	o = tag(op(hapi, "delete-snapshot", http.MethodDelete, "/api/v1/snapshots/{id}", "Delete a snapshot",
		http.StatusUnauthorized, http.StatusNotFound, http.StatusInternalServerError, http.StatusNotImplemented))
	o.DefaultStatus = http.StatusNoContent
	huma.Register(hapi, o, func(ctx context.Context, in *snapshotIDInput) (*struct{}, error) {
		if err := ne.DeleteSnapshot(ctx, in.ID, callerFrom(ctx).engine()); err != nil {
			return nil, sessionError(s, err)
		}
		return nil, nil
	})
}

// snapshotError maps the engine's snapshot errors; ok is false for any
// other error.
func snapshotError(err error) (*Error, bool) {
	switch {
	case errors.Is(err, engine.ErrSnapshotNotFound):
		return errorf(http.StatusNotFound, "snapshot not found"), true
	case errors.Is(err, engine.ErrSnapshotQuota):
		return errorf(http.StatusTooManyRequests, "%s", err), true
	case errors.Is(err, engine.ErrSnapshotTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, "%s", err), true
	case errors.Is(err, engine.ErrSnapshotIntegrity):
		return errorf(http.StatusBadRequest, "%s", engine.ErrSnapshotIntegrity), true
	case errors.Is(err, engine.ErrSnapshotsDisabled):
		return errorf(http.StatusNotImplemented, "%s", engine.ErrSnapshotsDisabled), true
	case errors.Is(err, engine.ErrSnapshotWorkspace), errors.Is(err, engine.ErrSnapshotHeader):
		return errorf(http.StatusBadRequest, "%s", err), true
	}
	return nil, false
}
