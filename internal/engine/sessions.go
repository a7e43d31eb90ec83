package engine

import "context"

// The session calls of the API, the MCP server and the fleet's session
// router. Each authorizes the caller first (session, tenancy.go), then
// calls this node's sessions (internal/engine/sessions).

// CreateSession starts a session owned by req.Caller: a jail and an
// interpreter that waits for cells. It fails with ErrTooManySessions over
// the node's or the caller's cap, ErrInvalid for a request the server
// refuses and ErrSessionsDisabled on a server without jails for them; a
// session naming a workspace (req.Workspace) fails as a run does
// (ErrWorkspaceNotFound, ErrWorkspaceMounts).
//
// With req.FromSnapshot the session holds that snapshot's state and files
// (snapshots.go): ErrSnapshotNotFound unless it is the caller's own.
func (e *Engine) CreateSession(ctx context.Context, req SessionRequest) (Session, error) {
	if err := e.runWorkspace(ctx, Request{Caller: req.Caller, Workspace: req.Workspace}); err != nil {
		return Session{}, err
	}
	if req.FromSnapshot != "" {
		return e.restoreSession(ctx, req)
	}
	return e.sess.Create(ctx, req)
}

// GetSession describes a live session; ErrSessionNotFound when there is
// none or it is not c's.
func (e *Engine) GetSession(_ context.Context, id string, c Caller) (Session, error) {
	s, err := e.session(id, c)
	if err != nil {
		return Session{}, err
	}
	return s.Info(), nil
}

// ListSessions lists the live sessions of c (an admin's: every
// caller's), oldest first.
func (e *Engine) ListSessions(ctx context.Context, c Caller) []Session {
	if c.Admin {
		e.appendAction(ctx, actionRecord{Action: actionListAllSess, Caller: c.Name, Admin: true})
	}
	return e.sess.List(c.owns)
}

// FenceSessions ends every live session of this node without a word to
// Deps.OnSessionEnd and without deleting their snapshots, and returns
// their ids: the fleet declared this node lost (Deps.OnSelfLost), and
// another node may resume them from their checkpoints.
func (e *Engine) FenceSessions() []string {
	ids := e.sess.Fence()
	for _, id := range ids {
		if e.shares != nil {
			e.shares.Forget(id)
		}
	}
	return ids
}

// DeleteSession ends a session: its interpreter, its jail and its files.
// A running cell ends with it.
func (e *Engine) DeleteSession(_ context.Context, id string, c Caller) error {
	s, err := e.session(id, c)
	if err != nil {
		return err
	}
	e.sess.Delete(s)
	return nil
}

// ExecuteCell runs code in the session and returns its outcome (see
// sessions.Service.ExecuteCell). ErrSessionBusy: another cell is running.
func (e *Engine) ExecuteCell(ctx context.Context, id string, c Caller, req CellRequest) (CellResult, error) {
	s, err := e.sessionToRun(id, c)
	if err != nil {
		return CellResult{}, err
	}
	return e.sess.ExecuteCell(ctx, s, req)
}

// InterruptSession raises KeyboardInterrupt in the session's running cell;
// the session and its variables survive. It does nothing between cells.
func (e *Engine) InterruptSession(_ context.Context, id string, c Caller) error {
	s, err := e.session(id, c)
	if err != nil {
		return err
	}
	return e.sess.Interrupt(s)
}

// RestartSession replaces the session's interpreter with a fresh one in a
// fresh jail: variables and imports are gone, the workspace files are
// carried over, the execution count starts again. A running cell is
// killed.
func (e *Engine) RestartSession(ctx context.Context, id string, c Caller) (Session, error) {
	s, err := e.sessionToRun(id, c)
	if err != nil {
		return Session{}, err
	}
	return e.sess.Restart(ctx, s)
}

// PutSessionFile writes a file into the session's workspace.
func (e *Engine) PutSessionFile(ctx context.Context, id string, c Caller, unsafePath string, data []byte) error {
	s, err := e.sessionToRun(id, c)
	if err != nil {
		return err
	}
	return e.sess.PutFile(ctx, s, unsafePath, data)
}

// ListSessionFiles lists the regular files of the session's workspace.
func (e *Engine) ListSessionFiles(ctx context.Context, id string, c Caller) ([]SessionFile, error) {
	s, err := e.session(id, c)
	if err != nil {
		return nil, err
	}
	return e.sess.ListFiles(ctx, s)
}

// ReadSessionFile returns a regular file of the session's workspace.
// ErrFileNotFound: no such regular file (a link is not followed).
func (e *Engine) ReadSessionFile(ctx context.Context, id string, c Caller, unsafePath string) ([]byte, error) {
	s, err := e.session(id, c)
	if err != nil {
		return nil, err
	}
	return e.sess.ReadFile(ctx, s, unsafePath)
}

// SessionStats counts this node's live and busy sessions.
func (e *Engine) SessionStats() SessionStats { return e.sess.Stats() }

// LiveSessions counts this node's live sessions (starting ones included),
// for a layer spreading sessions over a fleet.
func (e *Engine) LiveSessions() int { return e.sess.Live() }

// SessionCap is the most sessions this node holds at once.
func (e *Engine) SessionCap() int { return e.sess.Cap() }
