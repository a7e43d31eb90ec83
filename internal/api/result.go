package api

import (
	"encoding/json"

	"github.com/pyexec/pyexec/internal/engine"
)

// ExecutionResult is python-executor's ExecutionResult plus the fields
// pyexec adds. Fields may be added; none may be renamed.
type ExecutionResult struct {
	ExecutionID string  `json:"execution_id" doc:"exe_ followed by a UUID" example:"exe_3f1c2b9e-8d4a-4f7e-9c1a-2b3c4d5e6f70"`
	Status      string  `json:"status" enum:"pending,running,completed,failed,killed" doc:"A Python exception is completed with a non-zero exit_code; failed means the execution could not finish (timeout, limits, infrastructure)"`
	ExitCode    int     `json:"exit_code" doc:"Exit status of the script; always present"`
	Stdout      string  `json:"stdout,omitempty"`
	Stderr      string  `json:"stderr,omitempty"`
	Error       string  `json:"error,omitempty" doc:"Why the execution failed or the exception message"`
	ErrorType   string  `json:"error_type,omitempty" doc:"Exception class, e.g. NameError"`
	ErrorLine   int     `json:"error_line,omitempty" doc:"Line of the innermost frame in the user's code"`
	Result      *string `json:"result,omitempty" doc:"repr of the last expression (eval with eval_last_expr)"`
	StartedAt   *Time   `json:"started_at,omitempty"`
	FinishedAt  *Time   `json:"finished_at,omitempty"`
	DurationMs  int64   `json:"duration_ms,omitempty"`
	Node        string  `json:"node,omitempty" doc:"The fleet node that runs or ran it (pyexec serve --node-name); absent while a queued execution waits for a worker"`

	Reason          string           `json:"reason,omitempty" doc:"Why it ended: timeout, oom, output_limit, killed, install_error, setup_error, node_lost, network_limit, or pre_command_failed (completed: a pre_commands entry failed and the script did not run)"`
	TimedOut        bool             `json:"timed_out"`
	CPUTimeMs       int64            `json:"cpu_time_ms,omitempty"`
	PeakMemoryBytes int64            `json:"peak_memory_bytes,omitempty"`
	StdoutTruncated bool             `json:"stdout_truncated,omitempty"`
	StderrTruncated bool             `json:"stderr_truncated,omitempty"`
	PythonVersion   string           `json:"python_version,omitempty"`
	Warnings        []string         `json:"warnings,omitempty" doc:"Policy warnings, and detected imports that were not installed"`
	Lint            []LintDiagnostic `json:"lint,omitempty" doc:"ruff's diagnostics when the request set lint (absent when the code is clean)"`
	CreatedAt       Time             `json:"created_at"`

	Outputs          []Output        `json:"outputs,omitempty" doc:"Rich outputs in order: display() calls, matplotlib figures, the last expression's bundle"`
	OutputsTruncated bool            `json:"outputs_truncated,omitempty" doc:"Some outputs were left out (size budget)"`
	Results          json.RawMessage `json:"results,omitempty" doc:"The script's top-level results dict, as JSON"`
	Files            []FileInfo      `json:"files,omitempty" doc:"Files the run created or changed (or those matching collect), stored as artifacts"`
	FilesOmitted     int             `json:"files_omitted,omitempty" doc:"Files left out by the server's caps on count and bytes"`
	NetworkEvents    []NetworkEvent  `json:"network_events,omitempty" doc:"Connection attempts and name lookups of an execution with network (docs/network.md)"`
}

// NetworkEvent is one connection attempt or name lookup of the payload.
type NetworkEvent struct {
	Proto    string `json:"proto" enum:"tcp,udp,dns,http"`
	Host     string `json:"host" doc:"The name asked for, or the address connected to"`
	Addr     string `json:"addr,omitempty" doc:"The address pyexec dialled"`
	Port     int    `json:"port,omitempty"`
	Verdict  string `json:"verdict" enum:"allow,deny,error"`
	Reason   string `json:"reason,omitempty" doc:"Why it was refused or failed, e.g. not_allowed, denied_range, sni_mismatch, private_address, bytes_in_limit"`
	BytesOut int64  `json:"bytes_out,omitempty"`
	BytesIn  int64  `json:"bytes_in,omitempty"`
	Secret   string `json:"secret,omitempty" doc:"The operator secret an http or dns event is about: injected (verdict allow) or its placeholder found where it is never replaced (deny); never its value"`
	Method   string `json:"method,omitempty" doc:"The method of the request an http event is about"`
	Path     string `json:"path,omitempty" doc:"The path (without the query) of the request an http event is about"`
	Status   int    `json:"status,omitempty" doc:"The destination's answer to the request an http event is about; 0: none"`
}

// newNetworkEvents copies the engine's network events for the wire.
func newNetworkEvents(evs []engine.NetworkEvent) []NetworkEvent {
	if len(evs) == 0 {
		return nil
	}
	out := make([]NetworkEvent, len(evs))
	for i, e := range evs {
		out[i] = NetworkEvent{Proto: e.Proto, Host: e.Host, Addr: e.Addr, Port: int(e.Port), Verdict: e.Verdict,
			Reason: e.Reason, BytesOut: e.BytesOut, BytesIn: e.BytesIn, Secret: e.Secret, Method: e.Method, Path: e.Path,
			Status: e.Status}
	}
	return out
}

// newResult encodes an engine record for the wire (times as Time).
func newResult(e *engine.Execution) ExecutionResult {
	r := ExecutionResult{
		ExecutionID:     e.ID,
		Status:          string(e.Status),
		ExitCode:        e.ExitCode,
		Stdout:          e.Stdout,
		Stderr:          e.Stderr,
		Error:           wireError(e),
		ErrorType:       e.ErrorType,
		ErrorLine:       e.ErrorLine,
		Result:          e.Result,
		StartedAt:       wireTimePtr(e.StartedAt),
		FinishedAt:      wireTimePtr(e.FinishedAt),
		DurationMs:      e.DurationMs,
		Node:            e.Node,
		Reason:          e.Reason,
		TimedOut:        e.TimedOut,
		CPUTimeMs:       e.CPUTimeMs,
		PeakMemoryBytes: e.PeakMemoryBytes,
		StdoutTruncated: e.StdoutTruncated,
		StderrTruncated: e.StderrTruncated,
		PythonVersion:   e.PythonVersion,
		Warnings:        e.Warnings,
		CreatedAt:       wireTime(e.CreatedAt),

		Outputs:          newOutputs(e.Outputs),
		OutputsTruncated: e.OutputsTruncated,
		Results:          e.Results,
		Files:            newFiles(e.Files),
		FilesOmitted:     e.FilesOmitted,
		NetworkEvents:    newNetworkEvents(e.NetworkEvents),
	}
	if len(e.Lint) > 0 {
		r.Lint = newDiagnostics(e.Lint)
	}
	return r
}

// wireError is the error of e as python-executor reports it: only a
// failed execution has one. A Python exception (completed) is told by
// error_type, error_line and the traceback on stderr; a killed execution
// by its status and reason. Its clients print any error as an extra
// "Error: ..." line, so a message on a completed run would be shown twice.
func wireError(e *engine.Execution) string {
	if e.Status != engine.StatusFailed {
		return ""
	}
	return e.Error
}
