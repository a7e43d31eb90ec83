package fleetsess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// The protocol between nodes. A request is a JSON call on the owner's
// subject (nodeSubject) or, for a create, on the placement subject that
// only nodes with a free session slot listen on (placeSubject, one queue
// group: one of them answers). The reply is a JSON reply: the engine's
// result or its error as a kind the sender turns back into the same
// sentinel. A message larger than the connection's max_payload travels
// through the store's object store: the message then carries only the
// object's name in the blobHeader header.
//
//	requester                                   owner
//	  call{op, id, caller, …}  ── pyexec.node.<owner>.session ──▶  engine.<Op>(…)
//	  ◀──────────────────── reply{body | err{kind, msg}}
//	  call{op: create}         ── pyexec.sessions.place (queue) ─▶  CreateSession
//	  ◀── accepted-by, install lines, end ── progress inbox
const (
	nodePrefix   = "pyexec.node."
	placeSubject = "pyexec.sessions.place"
	placeQueue   = "pyexec-sessions"
	blobHeader   = "Pyexec-Blob"
	nodeHeader   = "Pyexec-Node"
	endHeader    = "Pyexec-End"
)

func nodeSubject(node string) string { return nodePrefix + node + ".session" }

// Operations.
const (
	opCreate    = "create"
	opGet       = "get"
	opList      = "list"
	opDelete    = "delete"
	opExecute   = "execute"
	opInterrupt = "interrupt"
	opRestart   = "restart"
	opPutFile   = "put_file"
	opListFiles = "list_files"
	opReadFile  = "read_file"
	opSnapshot  = "snapshot"
	opFork      = "fork"
	opPing      = "ping"
	opShare     = "share_port"
	opRevoke    = "revoke_port"
)

// call is one request to another node's engine.
type call struct {
	Op     string                 `json:"op"`
	ID     string                 `json:"id,omitempty"`
	Caller callerWire             `json:"caller"`
	Create *engine.SessionRequest `json:"create,omitempty"`
	Cell   *engine.CellRequest    `json:"cell,omitempty"`
	Path   string                 `json:"path,omitempty"`
	Data   []byte                 `json:"data,omitempty"`
	Port   int                    `json:"port,omitempty"` // a preview's
	// Progress is the inbox that gets a create's install lines.
	Progress string `json:"progress,omitempty"`
}

type callerWire struct {
	Name  string `json:"name,omitempty"`
	Admin bool   `json:"admin,omitempty"`
}

func wireCaller(c engine.Caller) callerWire { return callerWire{Name: c.Name, Admin: c.Admin} }

func (c callerWire) engine() engine.Caller { return engine.Caller{Name: c.Name, Admin: c.Admin} }

// reply is the owner's answer: Body on success, Err otherwise.
type reply struct {
	Body json.RawMessage `json:"body,omitempty"`
	Err  *wireError      `json:"err,omitempty"`
}

type wireError struct {
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}

// kinds maps each engine sentinel a session call may return to its name
// on the wire. Anything else travels as "internal".
var kinds = []struct {
	name string
	err  error
}{
	{"session_not_found", engine.ErrSessionNotFound},
	{"session_busy", engine.ErrSessionBusy},
	{"session_secrets", engine.ErrSessionSecrets},
	{"session_workspace_too_large", engine.ErrSessionWorkspaceTooLarge},
	{"session_ended", engine.ErrSessionEnded}, // before a fork's: the session did not stay as it was
	{"session_fork_ended", engine.ErrSessionForkEnded},
	{"too_many_sessions", engine.ErrTooManySessions},
	{"sessions_disabled", engine.ErrSessionsDisabled},
	{"file_not_found", engine.ErrFileNotFound},
	{"snapshot_not_found", engine.ErrSnapshotNotFound},
	{"snapshot_quota", engine.ErrSnapshotQuota},
	{"snapshot_too_large", engine.ErrSnapshotTooLarge},
	{"snapshot_integrity", engine.ErrSnapshotIntegrity},
	{"snapshots_disabled", engine.ErrSnapshotsDisabled},
	{"key_overloaded", engine.ErrKeyOverloaded},
	{"overloaded", engine.ErrOverloaded},
	{"invalid", engine.ErrInvalid},
	{"closed", engine.ErrClosed},
	{"unavailable", engine.ErrUnavailable},
	{"previews_disabled", engine.ErrPreviewDisabled},
	{"too_many_shares", preview.ErrTooManyShares},
}

func encodeError(err error) *wireError {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return &wireError{Kind: k.name, Msg: err.Error()}
		}
	}
	return &wireError{Kind: "internal", Msg: err.Error()}
}

// remoteError is an error of another node's engine: the same text, and
// the same sentinel for errors.Is.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func (w *wireError) decode(node string) error {
	for _, k := range kinds {
		if k.name == w.Kind {
			return &remoteError{msg: w.Msg, sentinel: k.err}
		}
	}
	return fmt.Errorf("fleetsess: node %s: %s", node, w.Msg)
}

// encodeMsg builds a message for subject; a payload larger than the
// connection allows goes to the object store (see the protocol above).
func (r *Router) encodeMsg(ctx context.Context, subject string, v any) (*nats.Msg, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("fleetsess: encoding a message: %w", err)
	}
	m := nats.NewMsg(subject)
	if int64(len(b)) <= r.maxInline() {
		m.Data = b
		return m, nil
	}
	name, err := newBlobName()
	if err != nil {
		return nil, err
	}
	if err := r.cfg.Blobs.PutRequest(ctx, name, b); err != nil {
		return nil, fmt.Errorf("fleetsess: storing a large message: %w", err)
	}
	m.Header.Set(blobHeader, name)
	return m, nil
}

// decodeMsg reads a message built by encodeMsg into v.
func (r *Router) decodeMsg(ctx context.Context, m *nats.Msg, v any) error {
	b := m.Data
	if name := m.Header.Get(blobHeader); name != "" {
		var err error
		if b, err = r.cfg.Blobs.GetRequest(ctx, name); err != nil {
			return fmt.Errorf("fleetsess: reading a large message: %w", err)
		}
		if err := r.cfg.Blobs.DeleteRequest(ctx, name); err != nil {
			r.log.Warn("removing a large message", "name", name, "err", err)
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("fleetsess: decoding a message: %w", err)
	}
	return nil
}

// maxInline is the largest payload sent in the message itself: the
// server's max_payload less room for headers.
func (r *Router) maxInline() int64 { return r.cfg.Conn.MaxPayload() - 4<<10 }
