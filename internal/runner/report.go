package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors of ParseReport and ParseOutput. ErrNoReport and
// ErrMalformedReport mean the caller knows only the exit code: the user's
// code closed the channel, ended the process with os._exit, was killed, or
// wrote over the report.
var (
	// ErrNoReport: the channel carried nothing.
	ErrNoReport = errors.New("runner sent no report")
	// ErrMalformedReport: the channel carried something that is not a report.
	ErrMalformedReport = errors.New("malformed runner report")
	// ErrNotOutput: a channel line is not a rich output (it may be the
	// report, or bytes the user's code wrote).
	ErrNotOutput = errors.New("not a runner output")
)

// Output kinds (Output.Type).
const (
	OutputDisplay = "display" // display(obj), plt.show(), figures left open
	OutputResult  = "result"  // the value of the last expression
)

// Output is one rich output, as Jupyter's display_data/execute_result: a
// MIME bundle keyed by MIME type. Text types hold a JSON string, images a
// base64 JSON string (SVG stays text), application/json any JSON value.
type Output struct {
	Type     string                     `json:"type"`
	Data     map[string]json.RawMessage `json:"data"`
	Metadata json.RawMessage            `json:"metadata,omitempty"`
}

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
	// Outputs are the rich outputs in the order they happened.
	Outputs []Output `json:"outputs,omitempty"`
	// OutputsDropped counts outputs left out once the run's output budget
	// (4 MiB) was spent.
	OutputsDropped int `json:"outputs_dropped,omitempty"`
	// Results is the JSON of the dict the script left in its global
	// `results`; nil when there was none.
	Results json.RawMessage `json:"results,omitempty"`
	// ResultsTruncated says `results` was left out for being over 1 MiB.
	ResultsTruncated bool `json:"results_truncated,omitempty"`
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

// ParseOutput decodes one channel line as the driver streams it while the
// user's code runs. Lines that are not outputs yield ErrNotOutput.
func ParseOutput(line []byte) (Output, error) {
	var wire struct {
		Output *Output `json:"output"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &wire); err != nil || wire.Output == nil {
		return Output{}, ErrNotOutput
	}
	o := *wire.Output
	if (o.Type != OutputDisplay && o.Type != OutputResult) || len(o.Data) == 0 {
		return Output{}, ErrNotOutput
	}
	return o, nil
}

// ParseReport decodes the bytes the driver wrote to its channel. The report
// is the last line; the lines before it that are outputs become
// Report.Outputs, anything else was written by the user's code and is
// ignored. An empty channel yields ErrNoReport, anything else that does
// not decode to a plausible report ErrMalformedReport.
func ParseReport(b []byte) (Report, error) {
	before, last, err := splitReport(b)
	if err != nil {
		return Report{}, err
	}
	var outputs []Output
	for line := range bytes.Lines(before) {
		if o, err := ParseOutput(line); err == nil {
			outputs = append(outputs, o)
		}
	}
	return parseLast(last, outputs)
}

// splitReport cuts a channel's bytes into the lines before the report and
// the report's own line.
func splitReport(b []byte) (before, last []byte, err error) {
	b = bytes.TrimRight(b, " \t\r\n")
	if len(b) == 0 {
		return nil, nil, ErrNoReport
	}
	i := bytes.LastIndexByte(b, '\n')
	return b[:i+1], b[i+1:], nil
}

// parseLast decodes the report's line; outputs are the outputs of the
// lines before it.
func parseLast(b []byte, outputs []Output) (Report, error) {
	var wire struct {
		Result           *string         `json:"result"`
		ResultTruncated  bool            `json:"result_truncated"`
		Error            *Error          `json:"error"`
		ExitCode         *int            `json:"exit_code"`
		OutputsDropped   int             `json:"outputs_dropped"`
		Results          json.RawMessage `json:"results"`
		ResultsTruncated bool            `json:"results_truncated"`
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
	case len(wire.Results) > 0 && wire.Results[0] != '{' && string(wire.Results) != "null":
		return Report{}, fmt.Errorf("%w: results is not an object", ErrMalformedReport)
	}
	if string(wire.Results) == "null" {
		wire.Results = nil
	}
	return Report{
		Result:           wire.Result,
		ResultTruncated:  wire.ResultTruncated,
		Error:            wire.Error,
		ExitCode:         *wire.ExitCode,
		Outputs:          outputs,
		OutputsDropped:   wire.OutputsDropped,
		Results:          wire.Results,
		ResultsTruncated: wire.ResultsTruncated,
	}, nil
}
