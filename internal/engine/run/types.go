package run

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv"
)

// Status is the wire-compatible state of an execution.
type Status string

// Execution states: pending → running → completed | failed | killed.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusKilled    Status = "killed"
)

// Final reports whether s is a terminal state.
func (s Status) Final() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusKilled
}

// Reasons say why an execution ended the way it did (Execution.Reason).
const (
	ReasonTimeout      = "timeout"
	ReasonOOM          = "oom"
	ReasonOutputLimit  = "output_limit"
	ReasonKilled       = "killed"
	ReasonInstallError = "install_error"
	ReasonSetupError   = "setup_error"
	ReasonNodeLost     = "node_lost"
	// ReasonPreCommand: a pre_commands entry failed, so the script never
	// ran; the execution is completed with that command's exit code.
	ReasonPreCommand = "pre_command_failed"
	// ReasonNetworkLimit ends an execution that went over one of its
	// network limits (connections at once, bytes out, bytes in).
	ReasonNetworkLimit = "network_limit"
)

// Exit codes of runs that did not end on their own, as a shell would
// report them.
const (
	ExitTimeout = 124
	ExitKilled  = 137
	ExitNoRun   = 1 // the payload never ran
)

// File is one file of a project, relative to the workspace. Data is the
// raw content: a transport that carries text (the JSON API's
// {"name","content","encoding":"base64"}) decodes it before building the
// Request, so binary files arrive byte for byte.
type File struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
	Mode uint32 `json:"mode,omitempty"`
}

// Request is one execution as the engine receives it, already decoded and
// size-checked by the caller. Zero limits mean the server defaults.
type Request struct {
	Files         []File        `json:"files"`
	Entrypoint    string        `json:"entrypoint"`
	Args          []string      `json:"args,omitempty"`
	Stdin         BinaryString  `json:"stdin,omitempty"`
	Env           []string      `json:"env,omitempty"` // KEY=value, added to the allowlisted base
	PythonVersion string        `json:"python_version,omitempty"`
	Requirements  string        `json:"requirements,omitempty"`
	PreCommands   []string      `json:"pre_commands,omitempty"`
	Lint          string        `json:"lint,omitempty"` // LintOff, LintWith or LintOnly
	EvalLastExpr  bool          `json:"eval_last_expr,omitempty"`
	Timeout       time.Duration `json:"timeout,omitempty"`
	MemoryBytes   int64         `json:"memory_bytes,omitempty"`
	DiskBytes     int64         `json:"disk_bytes,omitempty"`
	CPUShares     int           `json:"cpu_shares,omitempty"`
	Network       bool          `json:"network,omitempty"`
	// NetworkAllow narrows the operator's allow list for this execution
	// (nil: the operator's list as it is; empty: refused); see
	// docs/network.md. Not omitempty: a queued request must come back
	// with the list it was admitted with.
	NetworkAllow []string `json:"network_allow"`
	// Secrets names operator secrets (--secrets-file) the egress writes
	// into this execution's requests to their hosts; the payload gets a
	// placeholder in an environment variable of each name (secrets.go).
	Secrets []string `json:"secrets,omitempty"`

	// Rich output and files (see rich.go). DataFrames maps a variable name
	// to one of Files, loaded with pandas before the code runs; Collect
	// selects the files returned (empty: every file the run created or
	// changed).
	FigureFormat string            `json:"figure_format,omitempty"` // png (default) or svg
	MaxRows      int               `json:"max_rows,omitempty"`      // DataFrame rows kept; 0: the driver's default
	DataFrames   map[string]string `json:"dataframes,omitempty"`
	Collect      []string          `json:"collect,omitempty"`

	// Who asked, for the audit trail.
	Caller     string `json:"caller,omitempty"`
	ClientAddr string `json:"client_addr,omitempty"`
}

// Execution is the record of one execution; its JSON form is the
// python-executor ExecutionResult plus the fields pyexec adds.
type Execution struct {
	ID         string     `json:"execution_id"`
	Status     Status     `json:"status"`
	ExitCode   int        `json:"exit_code"`
	Stdout     string     `json:"stdout,omitempty"`
	Stderr     string     `json:"stderr,omitempty"`
	Error      string     `json:"error,omitempty"`
	ErrorType  string     `json:"error_type,omitempty"`
	ErrorLine  int        `json:"error_line,omitempty"`
	Result     *string    `json:"result,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMs int64      `json:"duration_ms,omitempty"`
	// Node is the node that runs or ran the execution (Config.Node), or
	// holds it waiting for a slot; empty while a queued one waits for a
	// worker.
	Node string `json:"node,omitempty"`

	Reason          string `json:"reason,omitempty"`
	TimedOut        bool   `json:"timed_out"`
	CPUTimeMs       int64  `json:"cpu_time_ms,omitempty"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	PythonVersion   string `json:"python_version,omitempty"`
	// Warnings are policy warnings and detected imports not installed.
	Warnings []string `json:"warnings,omitempty"`
	// Lint holds ruff's diagnostics when the request asked for them.
	Lint      []pyenv.Diagnostic `json:"lint,omitempty"`
	CreatedAt time.Time          `json:"created_at"`

	Outputs          []Output        `json:"outputs,omitempty"`
	OutputsTruncated bool            `json:"outputs_truncated,omitempty"`
	Results          json.RawMessage `json:"results,omitempty"` // the script's `results` dict
	Files            []FileInfo      `json:"files,omitempty"`
	FilesOmitted     int             `json:"files_omitted,omitempty"` // left out by the caps
	// NetworkEvents are the payload's connection attempts and lookups
	// (executions with network only).
	NetworkEvents []NetworkEvent `json:"network_events,omitempty"`
}

// FileInfo describes one file an execution produced (an artifact).
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	MIME   string `json:"mime"`
	// Content is the base64 of a small image, inlined in the record.
	Content string `json:"content,omitempty"`
}

// Fail marks x failed with reason and msg; a zero code becomes ExitNoRun.
func Fail(x *Execution, reason, msg string, code int) {
	x.Status, x.Reason, x.Error = StatusFailed, reason, msg
	if code == 0 {
		code = ExitNoRun
	}
	x.ExitCode = code
}

// Now is the engine's clock: UTC, truncated to microseconds so that the
// wire form never has more than 6 fractional digits.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// TimeoutMessage is the wire error of a run that timed out after d.
func TimeoutMessage(d time.Duration) string {
	return "execution timeout after " + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
