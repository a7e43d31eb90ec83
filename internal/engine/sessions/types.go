package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// Session errors; the API maps them with errors.Is (the engine
// re-exports them as ErrSessionNotFound, ErrSessionBusy...).
var (
	ErrNotFound = errors.New("session not found")                         // 404
	ErrBusy     = errors.New("a cell is already running in the session")  // 409
	ErrEnded    = errors.New("the session has ended")                     // 410
	ErrTooMany  = errors.New("too many live sessions")                    // 429
	ErrDisabled = errors.New("sessions are not available on this server") // 501
	// ErrSecretsOfOwner: a caller other than the owner (an operator) may
	// not run code in a session that holds secrets it may not use.
	ErrSecretsOfOwner = errors.New("the session holds secrets of its owner that this API key may not use") // 403
	// ErrWorkspaceTooLarge: a restart or a fork cannot carry the
	// workspace's files into the new interpreter (they add up to more than
	// its disk limit); the session keeps its interpreter.
	ErrWorkspaceTooLarge = errors.New("the session's workspace is too large to carry into a new interpreter") // 409
	// ErrForkEnded: a fork's new interpreter ended while it loaded the
	// parent's state (an object whose unpickling exits or crashes the
	// process, more memory than the session's limit); the fork is undone,
	// the parent keeps its interpreter.
	ErrForkEnded = errors.New("the fork's interpreter ended while loading the parent's state") // 409
	// ErrNoSnapshots: the service was built without a place to keep
	// snapshots (Deps.Vault).
	ErrNoSnapshots = errors.New("snapshots are not available on this server") // 501
)

// Jails prepares the jail a session lives in; *sandbox.Manager implements
// it.
type Jails interface {
	Prepare(ctx context.Context, base sandbox.Base) (*sandbox.Jail, error)
}

// Forker starts session kernels by forking them from a fork server whose
// interpreter already imported the base environment's modules;
// *pool.Pool implements it. start allows starting a fork server that is
// not running. A nil jail and nil error from ForkSession say the spec does
// not fork: the kernel then starts cold, in a jail of its own (Jails).
// release is called once the jail is closed.
type Forker interface {
	ForkSession(ctx context.Context, spec sandbox.Spec, out sandbox.OutputFunc, start bool) (j *sandbox.Jail, p *sandbox.Process, release func(), err error)
}

// Config is the operator's configuration of sessions. Zero fields
// take the defaults documented on each.
type Config struct {
	// Max bounds the live sessions of this node; MaxPerCaller those of one
	// caller (API key). Defaults 32 and 8.
	Max, MaxPerCaller int
	// DefaultIdle ends a session that ran no cell for that long; a request
	// may ask for up to MaxIdle. Defaults 10m and 1h.
	DefaultIdle, MaxIdle time.Duration
	// DefaultLifetime ends a session that long after it was created,
	// whatever it does; a request may ask for up to MaxLifetime. Defaults
	// 1h and 24h.
	DefaultLifetime, MaxLifetime time.Duration
	// DefaultMemoryBytes is the memory of a session that asks for none
	// (the jail's whole cgroup: every cell). Default 256 MiB.
	DefaultMemoryBytes int64
	// InterruptGrace is how long a timed-out cell has to yield to its
	// interrupt before the session is killed. Default 2s.
	InterruptGrace time.Duration
	// ReapInterval is how often idle and expired sessions are looked for.
	// Default 1s.
	ReapInterval time.Duration
	// MaxFileBytes caps one file read from a session's workspace. Default
	// 64 MiB.
	MaxFileBytes int64
	// SaveTimeout bounds saving or loading a session's state: past it
	// the kernel is interrupted, InterruptGrace later killed (a kernel
	// that did not finish pyexec's own cell cannot take the next).
	// Default 2m.
	SaveTimeout time.Duration
	// HibernateAfter saves a session idle for that long as a snapshot and
	// ends its kernel; its next call resumes it (hibernate.go). Zero never
	// does; it needs Deps.Vault.
	HibernateAfter time.Duration
	// Hibernations bounds the sessions saved for hibernation at once, by
	// workers apart from the reaper. Default 2.
	Hibernations int
	// ParkTimeout bounds the saves of the awake sessions at shutdown
	// (park.go): a session not saved by then ends. Keep it below the
	// engine's shutdown timeout. Default 20s.
	ParkTimeout time.Duration
	// CheckpointEvery saves a session, after a cell, as a checkpoint
	// when that long passed since its last one (checkpoint.go). Zero
	// never does; it needs Deps.Vault and Deps.OnCheckpoint.
	CheckpointEvery time.Duration
}

func (c Config) withDefaults() Config {
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Max == 0 {
		c.Max = 32
	}
	if c.MaxPerCaller == 0 {
		c.MaxPerCaller = 8
	}
	set(&c.DefaultIdle, 10*time.Minute)
	set(&c.MaxIdle, time.Hour)
	set(&c.DefaultLifetime, time.Hour)
	set(&c.MaxLifetime, 24*time.Hour)
	set(&c.InterruptGrace, 2*time.Second)
	set(&c.ReapInterval, time.Second)
	set(&c.SaveTimeout, 2*time.Minute)
	set(&c.ParkTimeout, 20*time.Second)
	if c.DefaultMemoryBytes == 0 {
		c.DefaultMemoryBytes = 256 << 20
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 64 << 20
	}
	if c.Hibernations == 0 {
		c.Hibernations = 2
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Max < 1 || c.MaxPerCaller < 1:
		return errors.New("session caps must be at least 1")
	case c.DefaultIdle <= 0 || c.DefaultIdle > c.MaxIdle:
		return errors.New("session idle timeout must be positive and at most the max idle timeout")
	case c.DefaultLifetime <= 0 || c.DefaultLifetime > c.MaxLifetime:
		return errors.New("session lifetime must be positive and at most the max lifetime")
	case c.DefaultMemoryBytes < 4<<20:
		return errors.New("session memory must be at least 4 MiB")
	case c.InterruptGrace < time.Millisecond || c.ReapInterval < time.Millisecond:
		return errors.New("session interrupt grace and reap interval must be positive")
	case c.MaxFileBytes < 1:
		return errors.New("session file size cap must be positive")
	case c.SaveTimeout < time.Second:
		return errors.New("the session save timeout must be at least 1s")
	case c.Hibernations < 1:
		return errors.New("at least one session must be able to hibernate at a time")
	case c.ParkTimeout < 0:
		return errors.New("the session park timeout must not be negative")
	case c.HibernateAfter < 0:
		return errors.New("the session hibernation delay must not be negative")
	case c.CheckpointEvery < 0:
		return errors.New("the session checkpoint interval must not be negative")
	}
	return nil
}

// Request creates a session. Zero values mean the server defaults.
type Request struct {
	PythonVersion string   `json:"python_version,omitempty"`
	Requirements  string   `json:"requirements,omitempty"`
	Env           []string `json:"env,omitempty"` // KEY=value, added to the allowlisted base
	MemoryBytes   int64    `json:"memory_bytes,omitempty"`
	DiskBytes     int64    `json:"disk_bytes,omitempty"`
	CPUShares     int      `json:"cpu_shares,omitempty"`
	// Network, NetworkAllow and Secrets are as in run.Request: the
	// session's kernels go out through an egress of their own with that
	// policy and those secrets (network.go). NetworkAllow keeps its
	// null (the operator's whole list) apart from [] (nothing, refused)
	// on the fleet's wire: no omitempty.
	Network      bool     `json:"network,omitempty"`
	NetworkAllow []string `json:"network_allow"`
	Secrets      []string `json:"secrets,omitempty"`
	// IdleTimeout ends the session after that long without a cell;
	// MaxLifetime that long after its creation.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	MaxLifetime time.Duration `json:"max_lifetime,omitempty"`
	// FigureFormat and MaxRows are as in run.Request, for every cell.
	FigureFormat string `json:"figure_format,omitempty"`
	MaxRows      int    `json:"max_rows,omitempty"`
	// Workspace names a workspace of the caller's, mounted at /workspace
	// for the session's life and committed when it ends;
	// WorkspaceMode is "rw" (the default) or "ro".
	Workspace     string `json:"workspace,omitempty"`
	WorkspaceMode string `json:"workspace_mode,omitempty"`
	// FromSnapshot restores the snapshot of that id into the new session
	// (the engine's CreateSession; Service.Restore): its configuration
	// fills the fields left zero.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// Caller owns the session (the API key's name); the per-caller cap
	// counts by it.
	Caller string `json:"caller,omitempty"`
	// Progress, if set, receives the installer's lines while the session's
	// environment is built (the create call waits for it).
	Progress func(string) `json:"-"`
}

// State says what a session is doing.
type State string

// Session states. A session that ended is gone: it is not listed.
const (
	Idle State = "idle" // waiting for a cell
	Busy State = "busy" // running a cell, saving or loading its state
	// Hibernated: saved as a snapshot, without a kernel; its next call
	// resumes it.
	Hibernated State = "hibernated"
)

// Session describes a live session.
type Session struct {
	ID             string        `json:"session_id"`
	State          State         `json:"state"`
	PythonVersion  string        `json:"python_version"`
	Caller         string        `json:"caller,omitempty"`
	Network        bool          `json:"network"`
	ExecutionCount int           `json:"execution_count"`
	CreatedAt      time.Time     `json:"created_at"`
	LastActivity   time.Time     `json:"last_activity"`
	ExpiresAt      time.Time     `json:"expires_at"` // the end of its max lifetime
	IdleTimeout    time.Duration `json:"idle_timeout"`
	MemoryBytes    int64         `json:"memory_bytes"`       // in use now, every process of the jail
	MemoryLimit    int64         `json:"memory_limit_bytes"` // the jail's limit
	DiskLimit      int64         `json:"disk_limit_bytes"`
	Restarts       int           `json:"restarts,omitempty"`
	// FromSnapshot names the snapshot a restored session was made from,
	// ForkedFrom the session a fork was made of; Skipped lists the
	// variables such a session could not load (a module its environment
	// lacks), on the answer of the restore or fork only.
	FromSnapshot string           `json:"from_snapshot,omitempty"`
	ForkedFrom   string           `json:"forked_from,omitempty"`
	Skipped      []runner.Skipped `json:"skipped,omitempty"`
}

// CellRequest is one cell to run in a session.
type CellRequest struct {
	Code         string        `json:"code"`
	EvalLastExpr bool          `json:"eval_last_expr,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"` // 0: the server's default timeout
}

// CellResult is the outcome of a cell: the execution result shape (its
// ExecutionID is "<session id>-<count>", not a stored execution) plus the
// session's execution count.
type CellResult struct {
	run.Execution
	SessionID      string `json:"session_id"`
	ExecutionCount int    `json:"execution_count"`
	// SessionEnded says the session did not survive the cell (its
	// interpreter died, or a timed-out cell did not yield to its interrupt).
	SessionEnded bool `json:"session_ended,omitempty"`
	// Resumed says the session was hibernated and resumed for this cell.
	Resumed bool `json:"resumed,omitempty"`
	// RestoredFrom, on the cell that resumed a session whose node was
	// lost, names the checkpoint it resumed from and the cells lost.
	RestoredFrom *RestoredFrom `json:"restored_from,omitempty"`
}

// RestoredFrom is the checkpoint a session resumed from after its node was
// lost: CellsLost cells had run after it and their effects are gone.
// CheckpointExecutionCount is the session's execution count when the
// checkpoint was taken: the cells after it are lost whatever CellsLost
// says (which may undercount: the count of cells is recorded after each
// answer), and the next cell is numbered CheckpointExecutionCount+1.
type RestoredFrom struct {
	SnapshotID               string `json:"snapshot_id"`
	CellsLost                int    `json:"cells_lost"`
	CheckpointExecutionCount int    `json:"checkpoint_execution_count"`
}

// Saved describes a snapshot a session was saved as.
type Saved struct {
	ID             string           `json:"snapshot_id"`
	Bytes          int64            `json:"bytes"`
	ExecutionCount int              `json:"execution_count"`
	Saved          []string         `json:"saved"`
	Skipped        []runner.Skipped `json:"skipped"`
}

// File is a file of a session's workspace.
type File struct {
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// Stats counts this node's sessions (for metrics).
type Stats struct {
	Live, Busy  int
	Asleep      int   // hibernated now
	MemoryBytes int64 // in use now by every session's jail
	// Since the service started: hibernations done, failed (the session
	// stays awake), and ended by the session's interpreter ending as it
	// was saved (the session ends); resumes done and failed.
	Hibernated, HibernateFailed, HibernateEnded, Resumed, ResumeFailed int64
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", run.ErrInvalid, fmt.Sprintf(format, args...))
}
