package client

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// ExecutionStatus is the state of an execution on the wire.
type ExecutionStatus string

// Execution states: pending → running → completed | failed | killed.
const (
	// StatusPending means the execution is queued and has not started.
	StatusPending ExecutionStatus = "pending"
	// StatusRunning means the code is running.
	StatusRunning ExecutionStatus = "running"
	// StatusCompleted means the code ran to its end; a Python exception is
	// still completed, with a non-zero ExitCode.
	StatusCompleted ExecutionStatus = "completed"
	// StatusFailed means the execution could not finish: a timeout, a limit,
	// or a failure of the service itself (see Error and Reason).
	StatusFailed ExecutionStatus = "failed"
	// StatusKilled means the execution was killed on request.
	StatusKilled ExecutionStatus = "killed"
)

// Final reports whether s is a terminal state (completed, failed or killed).
func (s ExecutionStatus) Final() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusKilled
}

// Reasons a server gives in ExecutionResult.Reason for how an execution ended.
const (
	ReasonTimeout      = "timeout"
	ReasonOOM          = "oom"
	ReasonOutputLimit  = "output_limit"
	ReasonKilled       = "killed"
	ReasonInstallError = "install_error"
	ReasonSetupError   = "setup_error"
	ReasonNodeLost     = "node_lost"
	// ReasonPreCommand is on a completed execution whose script never ran:
	// a pre_commands entry failed, and ExitCode is that command's.
	ReasonPreCommand = "pre_command_failed"
)

// ExecutionConfig holds the resource limits of one execution. A zero value
// (or an absent field) means the server's default.
type ExecutionConfig struct {
	// TimeoutSeconds is the wall-clock limit of the execution.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// NetworkDisabled, when set, says explicitly whether the code may use
	// the network. Absent and false are different requests: older servers
	// gave the code network access when the field was absent, so set it
	// (see Bool) whenever the answer matters. pyexec keeps the network off
	// unless it is asked for and the operator allows it.
	NetworkDisabled *bool `json:"network_disabled,omitempty"`
	// MemoryMB is the memory limit in MiB.
	MemoryMB int `json:"memory_mb,omitempty"`
	// DiskMB is the limit of the writable workspace in MiB.
	DiskMB int `json:"disk_mb,omitempty"`
	// CPUShares is the relative CPU weight (1024 is one default share).
	CPUShares int `json:"cpu_shares,omitempty"`
	// Network asks for network limited to Allow, which narrows the
	// operator's list (pyexec only; see docs/network.md).
	Network *NetworkConfig `json:"network,omitempty"`
	// Secrets names operator secrets (the server's --secrets-file) for the
	// execution: the code gets an environment variable of each name
	// holding a placeholder, which the server's egress replaces by the
	// value in requests to the secret's hosts. It needs network; an
	// unknown name, or one the API key may not use, is a 400 (pyexec only;
	// see docs/network.md).
	Secrets []string `json:"secrets,omitempty"`
	// Workspace names a workspace of the key, mounted at /workspace for
	// the run; what the run leaves there is committed as its next version,
	// whatever the outcome (pyexec only; see docs/workspaces.md).
	Workspace string `json:"workspace,omitempty"`
	// WorkspaceMode is "rw" (the default) or "ro": mounted read-only.
	WorkspaceMode string `json:"workspace_mode,omitempty"`
}

// NetworkConfig narrows an execution's network to the destinations in
// Allow: names (*.pypi.org), IPs, CIDRs, each with an optional :port.
type NetworkConfig struct {
	Allow []string `json:"allow"`
}

// NetworkEvent is one connection attempt or name lookup of the code.
type NetworkEvent struct {
	Proto    string `json:"proto"` // tcp, udp or dns
	Host     string `json:"host"`
	Addr     string `json:"addr,omitempty"`
	Port     int    `json:"port,omitempty"`
	Verdict  string `json:"verdict"` // allow, deny or error
	Reason   string `json:"reason,omitempty"`
	BytesOut int64  `json:"bytes_out,omitempty"`
	BytesIn  int64  `json:"bytes_in,omitempty"`
}

// StdinText returns the Stdin and StdinEncoding fields that give a
// program data on its standard input byte for byte: data itself when it
// is UTF-8 text (which every python-executor server reads), its base64
// with "base64" otherwise (pyexec servers only).
func StdinText(data []byte) (stdin, encoding string) {
	if utf8.Valid(data) {
		return string(data), ""
	}
	return base64.StdEncoding.EncodeToString(data), "base64"
}

// Bool returns a pointer to b, for ExecutionConfig.NetworkDisabled.
func Bool(b bool) *bool { return &b }

// Metadata is the JSON part of a multipart execution request
// (ExecuteSync, ExecuteAsync): which file to run and how.
type Metadata struct {
	// Entrypoint is the path of the Python file to run, inside the archive.
	Entrypoint string `json:"entrypoint"`
	// DockerImage names an interpreter the way python-executor did, e.g.
	// "python:3.12-slim"; pyexec maps it to an installed Python version.
	DockerImage string `json:"docker_image,omitempty"`
	// RequirementsTxt is the text of a requirements.txt to install first.
	RequirementsTxt string `json:"requirements_txt,omitempty"`
	// PreCommands are shell commands run before the script.
	PreCommands []string `json:"pre_commands,omitempty"`
	// Stdin is given to the script on standard input.
	Stdin string `json:"stdin,omitempty"`
	// StdinEncoding is "" for text, "base64" when Stdin is the base64 of
	// bytes that are not UTF-8 (a pyexec addition; see StdinText).
	StdinEncoding string `json:"stdin_encoding,omitempty"`
	// EnvVars are extra environment variables, each "KEY=value".
	EnvVars []string `json:"env_vars,omitempty"`
	// ScriptArgs are the script's arguments (sys.argv[1:]).
	ScriptArgs []string `json:"script_args,omitempty"`
	// Config holds the resource limits; nil means the server defaults.
	Config *ExecutionConfig `json:"config,omitempty"`
	// Lint asks for ruff's diagnostics (a pyexec addition).
	Lint LintMode `json:"lint,omitempty"`

	// Rich output and files (pyexec additions).
	RichOptions
}

// CodeFile is one file of a SimpleExecRequest.
type CodeFile struct {
	// Name is the file's path in the workspace, e.g. "main.py".
	Name string `json:"name"`
	// Content is the file's text, or with Encoding "base64" the base64
	// of its bytes (see BinaryFile).
	Content string `json:"content"`
	// Encoding is "" or "utf-8" for text, "base64" for binary data.
	Encoding string `json:"encoding,omitempty"`
}

// SimpleExecRequest is the JSON body of Eval: code as text, no archive.
type SimpleExecRequest struct {
	// Code becomes main.py; ignored when Files is set.
	Code string `json:"code,omitempty"`
	// Files are the files of a multi-file program; they win over Code.
	Files []CodeFile `json:"files,omitempty"`
	// Entrypoint is the file to run (default: the first of Files, or main.py).
	Entrypoint string `json:"entrypoint,omitempty"`
	// Stdin is given to the program on standard input.
	Stdin string `json:"stdin,omitempty"`
	// StdinEncoding is "" for text, "base64" when Stdin is the base64 of
	// bytes that are not UTF-8 (a pyexec addition; see StdinText).
	StdinEncoding string `json:"stdin_encoding,omitempty"`
	// Config holds the resource limits; nil means the server defaults.
	Config *ExecutionConfig `json:"config,omitempty"`
	// PythonVersion selects the interpreter, e.g. "3.12".
	PythonVersion string `json:"python_version,omitempty"`
	// EvalLastExpr asks for the repr of a final expression in Result.
	EvalLastExpr bool `json:"eval_last_expr,omitempty"`
	// RequirementsTxt lists packages to install; "-" turns off the
	// detection of imports.
	RequirementsTxt string `json:"requirements_txt,omitempty"`
	// Lint asks for ruff's diagnostics (a pyexec addition).
	Lint LintMode `json:"lint,omitempty"`

	// Rich output and files (pyexec additions).
	RichOptions
}

// ExecutionResult is the state and outcome of one execution.
type ExecutionResult struct {
	// ExecutionID is "exe_" followed by a UUID.
	ExecutionID string `json:"execution_id"`
	// Status is the execution's state.
	Status ExecutionStatus `json:"status"`
	// ExitCode is the exit status of the script (always present).
	ExitCode int `json:"exit_code"`
	// Stdout and Stderr are the captured output (partial if the execution
	// was killed or timed out).
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Error describes why a failed execution failed.
	Error string `json:"error,omitempty"`
	// ErrorType is the class of the Python exception, e.g. "NameError".
	ErrorType string `json:"error_type,omitempty"`
	// ErrorLine is the line of the user's code where the exception was raised.
	ErrorLine int `json:"error_line,omitempty"`
	// StartedAt and FinishedAt bound the run of the code.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// DurationMs is the wall-clock duration of the run.
	DurationMs int64 `json:"duration_ms,omitempty"`
	// Node is the fleet node that runs or ran the execution (its
	// --node-name); empty until it starts. A pyexec addition.
	Node string `json:"node,omitempty"`
	// Result is the repr of the last expression (Eval with EvalLastExpr),
	// nil when there was none.
	Result *string `json:"result,omitempty"`

	// Reason says why the execution ended as it did (one of the Reason
	// constants); empty for a normal end. A pyexec addition.
	Reason string `json:"reason,omitempty"`
	// TimedOut reports that the time limit ended the execution.
	TimedOut bool `json:"timed_out,omitempty"`
	// CPUTimeMs is the CPU time used by all processes of the execution.
	CPUTimeMs int64 `json:"cpu_time_ms,omitempty"`
	// PeakMemoryBytes is the highest memory use of the execution.
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
	// StdoutTruncated and StderrTruncated report output cut at the limit.
	StdoutTruncated bool `json:"stdout_truncated,omitempty"`
	StderrTruncated bool `json:"stderr_truncated,omitempty"`
	// PythonVersion is the interpreter that ran the code, e.g. "3.12.7".
	PythonVersion string `json:"python_version,omitempty"`
	// Warnings are policy warnings and detected imports that were not
	// installed.
	Warnings []string `json:"warnings,omitempty"`
	// Lint holds ruff's diagnostics when the request asked for them.
	Lint []Diagnostic `json:"lint,omitempty"`
	// CreatedAt is when the server accepted the execution.
	CreatedAt *time.Time `json:"created_at,omitempty"`

	// Outputs are the rich outputs in order: display() calls, matplotlib
	// figures and the bundle of the last expression. A pyexec addition.
	Outputs []Output `json:"outputs,omitempty"`
	// OutputsTruncated reports outputs left out for size.
	OutputsTruncated bool `json:"outputs_truncated,omitempty"`
	// Results is the JSON of the script's top-level results dict.
	Results json.RawMessage `json:"results,omitempty"`
	// Files are the files the run created or changed (or those matching
	// Collect), downloadable with DownloadFile.
	Files []FileInfo `json:"files,omitempty"`
	// FilesOmitted counts files left out by the server's caps.
	FilesOmitted int `json:"files_omitted,omitempty"`
	// NetworkEvents are the code's connection attempts and lookups.
	NetworkEvents []NetworkEvent `json:"network_events,omitempty"`
	// Workspace is what became of the run's workspace (its
	// ExecutionConfig.Workspace): the version its changes made.
	Workspace *WorkspaceOutcome `json:"workspace,omitempty"`
}

// HealthStatus is the answer of GET /health.
type HealthStatus struct {
	// Status is "ok" when the server is healthy.
	Status string `json:"status"`
	// Node is the server's name in a fleet (--node-name).
	Node string `json:"node,omitempty"`
	// NATS is the server's connection to its store; nil from a server
	// that does not report it.
	NATS *HealthNATS `json:"nats,omitempty"`
	// Tools is the state of the server's helper programs; nil from a
	// server that does not report them.
	Tools *HealthTools `json:"tools,omitempty"`
	// Previews says the server shares preview URLs of sessions' web apps
	// (--preview); false from a server that does not report it.
	Previews bool `json:"previews,omitempty"`
}

// HealthNATS is the NATS part of HealthStatus.
type HealthNATS struct {
	// Mode is "embedded" (the in-process server) or "cluster" (--nats).
	Mode string `json:"mode"`
	// Connected is false while the connection to the cluster is lost.
	Connected bool `json:"connected"`
	// Server is the cluster server connected to.
	Server string `json:"server,omitempty"`
}

// HealthTools is the tools part of HealthStatus.
type HealthTools struct {
	// Installer builds environments: "uv", or "pip" without uv.
	Installer string `json:"installer"`
	// Lint is "ready", "starting" (ruff being fetched) or "unavailable".
	Lint string `json:"lint"`
}

// ListOptions filter and page ListExecutions. Zero values mean no filter
// and the server's default page size.
type ListOptions struct {
	// Status keeps only executions in this state.
	Status ExecutionStatus
	// Limit is the largest number of executions in one page.
	Limit int
	// Cursor continues a listing from the Next of the previous page.
	Cursor string
}

// ExecutionList is one page of ListExecutions, most recent first.
type ExecutionList struct {
	// Executions are the records of this page.
	Executions []ExecutionResult `json:"executions"`
	// Next is the cursor of the following page; empty on the last page.
	Next string `json:"next_cursor,omitempty"`
}

// EventType names the kind of a live Event.
type EventType string

// Event types of GET /api/v1/executions/{id}/events.
const (
	// EventStdout carries a chunk of standard output in Data.
	EventStdout EventType = "stdout"
	// EventStderr carries a chunk of standard error in Data.
	EventStderr EventType = "stderr"
	// EventStatus carries the new ExecutionStatus in Data; the stream ends
	// after the one that is final.
	EventStatus EventType = "status"
	// EventInstall carries a line of installer progress while the
	// execution's dependency environment is built.
	EventInstall EventType = "install"
	// EventDisplay carries a rich output as it happens: Data is the JSON
	// of an Output (see Event.Output).
	EventDisplay EventType = "display"
)

// Event is one live event of an execution. Seq starts at 1 and has no gaps.
type Event struct {
	Seq  uint64    `json:"seq"`
	Type EventType `json:"type"`
	Data string    `json:"data"`
	Time time.Time `json:"time"`
}

// Final reports whether e is the status event that ends the stream.
func (e Event) Final() bool {
	return e.Type == EventStatus && ExecutionStatus(e.Data).Final()
}
