package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors of ParseReport. Either one means the caller knows only
// the exit code: the user's code closed the channel, ended the process with
// os._exit, was killed, or wrote over the report.
var (
	// ErrNoReport: the channel carried nothing.
	ErrNoReport = errors.New("runner sent no report")
	// ErrMalformedReport: the channel carried something that is not a report.
	ErrMalformedReport = errors.New("malformed runner report")
)

// Report is what the driver says about one run.
type Report struct {
	// Result is the repr of the last expression (Options.EvalLastExpr); nil
	// when there was none or its value was None.
	Result *string `json:"result"`
	// ResultTruncated says Result was cut to the driver's cap (1 Mi chars).
	ResultTruncated bool `json:"result_truncated,omitempty"`
	// Error describes the uncaught exception; nil when there was none
	// (sys.exit is not an error).
	Error *Error `json:"error"`
	// ExitCode is the status the driver exits with: 130 after an uncaught
	// KeyboardInterrupt (the interpreter then dies of SIGINT).
	ExitCode int `json:"exit_code"`
}

// Error is an uncaught exception of the user's code.
type Error struct {
	Name      string `json:"name"`      // class name, e.g. "NameError"
	Value     string `json:"value"`     // str() of the exception
	Traceback string `json:"traceback"` // as printed, without driver frames
	// Line is the line of the innermost frame in the user's own files (a
	// SyntaxError's own line); 0 when no user frame is involved.
	Line int `json:"line"`
	// File is that frame's file relative to the workspace; empty with Line 0.
	File string `json:"file"`
}

// ParseReport decodes the bytes the driver wrote to its channel. The report
// is the last line; anything before it was written by the user's code and
// is ignored. An empty channel yields ErrNoReport, anything else that does
// not decode to a plausible report ErrMalformedReport.
func ParseReport(b []byte) (Report, error) {
	b = bytes.TrimRight(b, " \t\r\n")
	if len(b) == 0 {
		return Report{}, ErrNoReport
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	var wire struct {
		Result          *string `json:"result"`
		ResultTruncated bool    `json:"result_truncated"`
		Error           *Error  `json:"error"`
		ExitCode        *int    `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrMalformedReport, err)
	}
	switch {
	case wire.ExitCode == nil:
		return Report{}, fmt.Errorf("%w: no exit_code", ErrMalformedReport)
	case *wire.ExitCode < 0 || *wire.ExitCode > 255:
		return Report{}, fmt.Errorf("%w: exit_code %d out of range", ErrMalformedReport, *wire.ExitCode)
	case wire.Error != nil && wire.Error.Name == "":
		return Report{}, fmt.Errorf("%w: error without a name", ErrMalformedReport)
	case wire.Error != nil && wire.Error.Line < 0:
		return Report{}, fmt.Errorf("%w: negative error line", ErrMalformedReport)
	}
	return Report{
		Result:          wire.Result,
		ResultTruncated: wire.ResultTruncated,
		Error:           wire.Error,
		ExitCode:        *wire.ExitCode,
	}, nil
}
