package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine/executions"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/preview"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/workspace"
)

// Tenancy: every execution, session, snapshot and workspace belongs to the caller that created
// it (Request.Caller, SessionRequest.Caller: the API key's name, or
// "anonymous" on a server without keys). Every engine call that reads or
// changes one takes the Caller and checks ownership here, before anything
// else, so that no transport can forget: another caller is told the
// execution or session does not exist, exactly as for an unknown id.
// Admin callers (operator keys) see and kill everything; what they do to
// work that is not theirs goes to the audit trail. A preview URL
// (previews.go) stands for the session's owner, for one port of that
// session only (sharedSession).

// Caller is who asks the engine for something.
type Caller struct {
	// Name owns what this caller creates: the API key's name. An empty
	// name owns nothing (fail closed).
	Name string
	// Admin callers may read and kill the work of every caller.
	Admin bool
}

// owns reports whether c may see and change what owner created.
func (c Caller) owns(owner string) bool {
	return c.Admin || (c.Name != "" && c.Name == owner)
}

// Owns reports whether c may see and change what owner created, for
// layers that hold a copy of the owner (a fleet's session registry).
func (c Caller) Owns(owner string) bool { return c.owns(owner) }

// loadFor reads a record on behalf of c: ErrNotFound, worded as for an
// unknown id, when it is not c's to see. action names what c does, for
// the audit trail of an admin's access to another caller's execution.
func (e *Engine) loadFor(ctx context.Context, c Caller, id, action string) (*executions.Record, error) {
	r, err := e.exec.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if !c.owns(r.Owner()) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if c.Name != r.Owner() && action != "" {
		e.appendAction(ctx, actionRecord{Action: action, Caller: c.Name, Admin: c.Admin, ExecutionID: id, Owner: r.Owner()})
	}
	return r, nil
}

// session finds a live session for c. A caller that may not use it gets
// ErrSessionNotFound, as if it did not exist; an admin's use of another
// caller's session goes to the audit trail.
func (e *Engine) session(id string, c Caller) (*sessions.Live, error) {
	s, err := e.sess.Lookup(id)
	if errors.Is(err, ErrSessionNotFound) {
		if owner, ok := e.sess.Parked(id); ok && c.owns(owner) {
			return nil, fmt.Errorf("%w: session %s was saved while this node restarts; retry later", ErrUnavailable, id)
		}
	}
	if err != nil {
		return nil, err
	}
	if !c.owns(s.Owner()) {
		return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	if c.Name != s.Owner() {
		e.appendAction(context.Background(), actionRecord{Action: actionSession, Caller: c.Name, Admin: c.Admin,
			SessionID: id, Owner: s.Owner()})
	}
	return s, nil
}

// sessionToRun is session for a call that runs code in the session or
// changes what code it runs (a cell, a restart, a fork, a file written):
// an operator is refused (ErrSessionSecrets) in another key's session
// that holds secrets the operator's key may not use, since the egress
// would inject them into code the operator wrote.
func (e *Engine) sessionToRun(id string, c Caller) (*sessions.Live, error) {
	s, err := e.session(id, c)
	if err != nil || c.Name == s.Owner() {
		return s, err
	}
	if err := e.sess.MayRunCode(s, c.Name); err != nil {
		return nil, err
	}
	return s, nil
}

// snapshotFor describes snapshot id for c. Only the snapshots their owners
// asked for are seen (the server's own are not the API's); a caller that
// may not see it gets ErrSnapshotNotFound, as for an unknown id. An
// admin may see and delete another caller's snapshot (audited) when
// adminMay, but a restore takes only the caller's own: its state is code
// of its owner, and runs only in its owner's session.
func (e *Engine) snapshotFor(ctx context.Context, id string, c Caller, adminMay bool) (SnapshotInfo, error) {
	in, err := e.snaps.Stat(ctx, id)
	if err != nil {
		return SnapshotInfo{}, err
	}
	mine := c.Name != "" && c.Name == in.Owner
	if in.Kind != snapshot.KindUser || !(mine || adminMay && c.owns(in.Owner)) {
		return SnapshotInfo{}, fmt.Errorf("%w: %s", ErrSnapshotNotFound, id)
	}
	if !mine {
		e.appendAction(ctx, actionRecord{Action: actionSnapshot, Caller: c.Name, Admin: c.Admin, SnapshotID: id,
			Owner: in.Owner})
	}
	return in, nil
}

// sharedSession finds the live session a preview URL's token opens, and
// the port it opens there. The token stands for the owner it was issued
// to, for that session and port only: ErrShareInvalid when it opens
// nothing (unknown, altered, revoked or expired), ErrSessionNotFound once
// the session ended.
func (e *Engine) sharedSession(token string) (*sessions.Live, preview.Share, error) {
	sh, err := e.shares.Check(token)
	if err != nil {
		return nil, preview.Share{}, fmt.Errorf("%w: %w", ErrShareInvalid, err)
	}
	s, err := e.session(sh.Session, Caller{Name: sh.Owner})
	if err != nil {
		return nil, sh, err
	}
	return s, sh, nil
}

// workspaceFor addresses a workspace on behalf of c: the workspace
// manager's caller and reference. A caller without a name, or one naming
// another owner without being an admin, gets ErrWorkspaceNotFound, worded
// as for a workspace that does not exist; the manager checks the owner
// again on every call. An admin's use of another caller's workspace goes to
// the audit trail.
func (e *Engine) workspaceFor(ctx context.Context, c Caller, ref WorkspaceRef, action string) (*workspace.Manager, workspace.Caller, workspace.Ref, error) {
	wc, wr := workspace.Caller{Name: c.Name, Admin: c.Admin}, workspace.Ref{Owner: ref.Owner, Name: ref.Name}
	if e.deps.Workspaces == nil {
		return nil, wc, wr, ErrWorkspacesDisabled
	}
	if wr.Owner == "" {
		wr.Owner = c.Name
	}
	if !c.owns(wr.Owner) || wr.Owner == workspace.AllOwners {
		return nil, wc, wr, fmt.Errorf("%w: workspace %q", ErrWorkspaceNotFound, ref.Name)
	}
	if c.Name != wr.Owner && action != "" {
		e.appendAction(ctx, actionRecord{Action: action, Caller: c.Name, Admin: c.Admin, Workspace: ref.Name, Owner: wr.Owner})
	}
	return e.deps.Workspaces, wc, wr, nil
}

// Actions recorded in the audit trail besides the end of an execution
// (action "end", which the executions record).
const (
	actionKill         = "kill"           // any kill of an execution
	actionRead         = "read"           // an admin read another caller's execution
	actionFollow       = "follow"         // ... followed its events
	actionFiles        = "files"          // ... listed or downloaded its files
	actionSession      = "session"        // an admin used another caller's session
	actionListAllSess  = "sessions_all"   // an admin listed every caller's sessions
	actionSnapshot     = "snapshot"       // an admin deleted another caller's snapshot
	actionListAllSnaps = "snapshots_all"  // an admin listed every caller's snapshots
	actionSessionNet   = "session_secret" // a session's network event naming a secret (an injection, a placeholder refused)
	actionWorkspace    = "workspace"      // an admin read or changed another caller's workspace
	actionListAllWs    = "workspaces_all" // an admin listed every caller's workspaces
)

// actionRecord is one line of the audit trail for something a caller did
// (the end of an execution is the executions' record). Owner is whose work
// it was.
type actionRecord struct {
	Time        time.Time `json:"time"`
	Action      string    `json:"action"`
	Caller      string    `json:"caller"`
	Admin       bool      `json:"admin,omitempty"`
	ExecutionID string    `json:"execution_id,omitempty"`
	SessionID   string    `json:"session_id,omitempty"`
	Workspace   string    `json:"workspace,omitempty"`
	SnapshotID  string    `json:"snapshot_id,omitempty"`
	Owner       string    `json:"owner,omitempty"`
	Status      Status    `json:"status,omitempty"`
	// NetworkEvent is a session's event naming a secret (its name, never
	// its value).
	NetworkEvent *egress.Event `json:"network_event,omitempty"`
}

// auditSessionSecret puts a session's network event naming a secret on
// the audit trail, as an execution's end record carries its events.
func (e *Engine) auditSessionSecret(sessionID, owner string, ev egress.Event) {
	e.appendAction(context.Background(), actionRecord{Action: actionSessionNet, Caller: owner, SessionID: sessionID,
		Owner: owner, NetworkEvent: &ev})
}

// appendAction writes an action to the audit trail. As for the end of an
// execution, a failure is logged at error level rather than failing what
// was done.
func (e *Engine) appendAction(ctx context.Context, a actionRecord) {
	a.Time = run.Now()
	b, err := json.Marshal(a)
	if err == nil {
		err = e.st.AppendAudit(ctx, b)
	}
	if err != nil {
		e.log.Error("appending audit record", "action", a.Action, "execution_id", a.ExecutionID,
			"session_id", a.SessionID, "err", err)
	}
}
