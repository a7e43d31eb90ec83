package engine

// The engine's types are its parts': callers need import only this
// package.

import (
	"encoding/json"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/executions"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/engine/snapshots"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// Sentinel errors. The API maps them to status codes with errors.Is.
var (
	ErrNotFound     = run.ErrNotFound         // 404
	ErrOverloaded   = admission.ErrOverloaded // 429 + Retry-After
	ErrInvalid      = run.ErrInvalid          // 400; wrapped with the detail
	ErrClosed       = run.ErrClosed           // 503
	ErrFileNotFound = run.ErrFileNotFound     // 404
	ErrUnavailable  = run.ErrUnavailable      // 503 + Retry-After
)

// ErrKeyOverloaded is ErrOverloaded for one caller: it has as many
// executions waiting as one API key may (429 + Retry-After).
var ErrKeyOverloaded = admission.ErrKeyOverloaded

// The vocabulary of one run (internal/engine/run).
type (
	Status            = run.Status
	File              = run.File
	Request           = run.Request
	BinaryString      = run.BinaryString
	Execution         = run.Execution
	FileInfo          = run.FileInfo
	Output            = run.Output
	NetworkEvent      = run.NetworkEvent
	WorkspaceOutcome  = run.WorkspaceOutcome
	Interpreter       = run.Interpreter
	Interpreters      = run.Interpreters
	Driver            = run.Driver
	DriverOptions     = run.DriverOptions
	Report            = run.Report
	LiveDriver        = run.LiveDriver
	Environments      = run.Environments
	EnvLease          = run.EnvLease
	Linter            = run.Linter
	LateLinter        = run.LateLinter
	RunnerDriver      = run.RunnerDriver
	PyenvInterpreters = run.PyenvInterpreters
	PyenvEnvironments = run.PyenvEnvironments
	PyenvLinter       = run.PyenvLinter
)

// Statuses, reasons, lint modes and output kinds (internal/engine/run).
const (
	StatusPending      = run.StatusPending
	StatusRunning      = run.StatusRunning
	StatusCompleted    = run.StatusCompleted
	StatusFailed       = run.StatusFailed
	StatusKilled       = run.StatusKilled
	ReasonTimeout      = run.ReasonTimeout
	ReasonOOM          = run.ReasonOOM
	ReasonOutputLimit  = run.ReasonOutputLimit
	ReasonKilled       = run.ReasonKilled
	ReasonInstallError = run.ReasonInstallError
	ReasonSetupError   = run.ReasonSetupError
	ReasonNodeLost     = run.ReasonNodeLost
	ReasonPreCommand   = run.ReasonPreCommand
	ReasonNetworkLimit = run.ReasonNetworkLimit
	LintOff            = run.LintOff
	LintWith           = run.LintWith
	LintOnly           = run.LintOnly
	OutputDisplay      = run.OutputDisplay
	OutputResult       = run.OutputResult
	FigurePNG          = run.FigurePNG
	FigureSVG          = run.FigureSVG
)

// Executions' events, listings and store measures
// (internal/engine/executions).
type (
	EventType   = executions.EventType
	Event       = executions.Event
	ListOptions = executions.ListOptions
	StoreStats  = executions.StoreStats
)

// Event types and store states.
const (
	EventStatus    = executions.EventStatus
	EventStdout    = executions.EventStdout
	EventStderr    = executions.EventStderr
	EventInstall   = executions.EventInstall
	EventDisplay   = executions.EventDisplay
	EventNetwork   = executions.EventNetwork
	StoreOK        = executions.StoreOK
	StoreNearLimit = executions.StoreNearLimit
	StoreFull      = executions.StoreFull
)

// Sessions (internal/engine/sessions).
type (
	SessionConfig  = sessions.Config
	SessionRequest = sessions.Request
	Session        = sessions.Session
	SessionState   = sessions.State
	CellRequest    = sessions.CellRequest
	CellResult     = sessions.CellResult
	SessionFile    = sessions.File
	SessionStats   = sessions.Stats
	Jails          = sessions.Jails
	Forker         = sessions.Forker
	SessionSaved   = sessions.Saved
	ParkedSession  = sessions.Parked
	RestoredFrom   = sessions.RestoredFrom
	// SessionCheckpoint is a checkpoint a session was saved as.
	SessionCheckpoint = sessions.Checkpoint
)

// Snapshots (internal/engine/snapshots).
type (
	SnapshotConfig = snapshots.Config
	SnapshotInfo   = snapshots.Info
	SnapshotStore  = snapshots.Store
)

// Snapshot errors; the API maps them with errors.Is.
var (
	ErrSnapshotNotFound  = snapshots.ErrNotFound  // 404
	ErrSnapshotQuota     = snapshots.ErrQuota     // 429
	ErrSnapshotTooLarge  = snapshots.ErrTooLarge  // 413
	ErrSnapshotIntegrity = snapshots.ErrIntegrity // 400
	ErrSnapshotsDisabled = snapshots.ErrDisabled  // 501
	// ErrSnapshotWorkspace: a workspace a snapshot cannot hold (a path a
	// restore could not write back, a file changed while it was saved).
	ErrSnapshotWorkspace = snapshot.ErrWorkspace // 400
	// ErrSnapshotHeader: a state a snapshot cannot describe (too many
	// names, a name too long).
	ErrSnapshotHeader = snapshot.ErrInvalidHeader // 400
)

// Session states.
const (
	SessionIdle       = sessions.Idle
	SessionBusy       = sessions.Busy
	SessionHibernated = sessions.Hibernated
)

// Session errors; the API maps them with errors.Is.
var (
	ErrSessionNotFound  = sessions.ErrNotFound // 404
	ErrSessionBusy      = sessions.ErrBusy     // 409
	ErrSessionEnded     = sessions.ErrEnded    // 410
	ErrTooManySessions  = sessions.ErrTooMany  // 429
	ErrSessionsDisabled = sessions.ErrDisabled // 501
	// ErrSessionSecrets: an operator may not run code in another key's
	// session holding secrets the operator's key may not use.
	ErrSessionSecrets = sessions.ErrSecretsOfOwner // 403
	// ErrSessionWorkspaceTooLarge: a restart or a fork cannot carry the
	// session's files; the session keeps its interpreter.
	ErrSessionWorkspaceTooLarge = sessions.ErrWorkspaceTooLarge // 409
	// ErrSessionForkEnded: a fork's interpreter ended while it loaded the
	// session's state; no fork is left, the session keeps its interpreter.
	ErrSessionForkEnded = sessions.ErrForkEnded // 409
)

// Fleet membership (internal/engine/fleet).
type NodeInfo = fleet.NodeInfo

// ErrNodeNameInUse is returned by Start when a live node already has
// Config.Node as its name.
var ErrNodeNameInUse = fleet.ErrNodeNameInUse

// DefaultNodeLostAfter is the default of Config.NodeLostAfter.
const DefaultNodeLostAfter = fleet.DefaultNodeLostAfter

// Nodes lists the nodes this node knows to be alive, itself included, by
// name: those whose heartbeat it saw within Config.NodeLostAfter.
func (e *Engine) Nodes() []NodeInfo { return e.mem.Nodes() }

// NodeURL is the URL a live node of the fleet advertises (this one's
// included); an error says why there is none.
func (e *Engine) NodeURL(node string) (string, error) { return e.mem.NodeURL(node) }

// BaseEnv is the payload's environment before the request's additions.
func BaseEnv() []string { return run.BaseEnv() }

// FastData is an Output's bundle as encoding/json writes it quickly.
func FastData(data map[string]json.RawMessage) map[string]any { return run.FastData(data) }

// NewLateLinter returns a LateLinter waiting for its linter.
func NewLateLinter(pending string, wait time.Duration) *LateLinter {
	return run.NewLateLinter(pending, wait)
}
