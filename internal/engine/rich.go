package engine

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"unicode"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// EventDisplay is a live rich output; its Data is the JSON of an Output.
const EventDisplay EventType = "display"

// Output kinds (Output.Type).
const (
	OutputDisplay = "display" // display(obj), a matplotlib figure
	OutputResult  = "result"  // the value of the last expression
)

// maxOutputBytes bounds the rich outputs kept in a record, so that a
// record with full stdout and stderr still fits the store's record limit.
const maxOutputBytes = 4 << 20

// Output is one rich output, a Jupyter-style MIME bundle: Data maps a MIME
// type to its content (a JSON string for text, base64 for PNG and JPEG
// images, any JSON value for application/json).
type Output struct {
	Type     string                     `json:"type"`
	Data     map[string]json.RawMessage `json:"data"`
	Metadata json.RawMessage            `json:"metadata,omitempty"`
}

// LiveDriver is a Driver whose outputs can be decoded while the payload
// runs; the engine then publishes them as display events. Live returns
// the decoder of one run.
type LiveDriver interface {
	Driver
	Live(emit func(Output)) LiveDecoder
}

// LiveDecoder decodes one run's result channel as it streams. Write
// receives the channel's bytes in chunks, in order, from one goroutine,
// and calls emit for each output as soon as it is complete. Once the run
// is over, Report decodes the report as Driver.Parse does, reusing the
// outputs it already decoded: the bytes of a large output (a figure) are
// decoded once per run, not twice.
type LiveDecoder interface {
	Write(chunk []byte)
	Report(channel []byte) (Report, error)
}

// Figure formats of Request.FigureFormat.
const (
	FigurePNG = "png"
	FigureSVG = "svg"
)

// driverOptions are the driver's options for req.
func driverOptions(req Request) DriverOptions {
	return DriverOptions{Args: req.Args, EvalLastExpr: req.EvalLastExpr,
		FigureFormat: req.FigureFormat, MaxRows: req.MaxRows, DataFrames: req.DataFrames}
}

// validateRich checks the rich-output and file options of a request.
func validateRich(req Request) error {
	switch {
	case req.FigureFormat != "" && req.FigureFormat != FigurePNG && req.FigureFormat != FigureSVG:
		return fmt.Errorf("figure_format %q: want png or svg", req.FigureFormat)
	case req.MaxRows < 0:
		return fmt.Errorf("max_rows must not be negative")
	}
	for name, file := range req.DataFrames {
		if !isIdentifier(name) {
			return fmt.Errorf("dataframes: %q is not a Python identifier", name)
		}
		if !slices.ContainsFunc(req.Files, func(f File) bool { return path.Clean(f.Path) == path.Clean(file) }) {
			return fmt.Errorf("dataframes: %s: file %q is not among the files", name, file)
		}
	}
	for _, g := range req.Collect {
		if _, err := path.Match(g, ""); err != nil || g == "" || path.IsAbs(g) {
			return fmt.Errorf("collect: invalid pattern %q", g)
		}
	}
	return nil
}

func isIdentifier(s string) bool {
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}

// keepOutputs returns the outputs that fit maxOutputBytes, in order, and
// whether any were left out.
func keepOutputs(outs []Output) ([]Output, bool) {
	size := 0
	for i, o := range outs {
		for _, v := range o.Data {
			size += len(v)
		}
		size += len(o.Metadata)
		if size > maxOutputBytes {
			return outs[:i], true
		}
	}
	return outs, false
}

// liveOutputs returns the jail's OutputFunc for a run and the decoder of
// its report: stdout and stderr go to out, the result channel to the
// driver's live decoder (when it has one), whose outputs become display
// events and then the report's outputs.
func (e *Engine) liveOutputs(out sandbox.OutputFunc, publish func(EventType, string)) (sandbox.OutputFunc, func([]byte) (Report, error)) {
	live, ok := e.deps.Driver.(LiveDriver)
	if !ok {
		return out, e.deps.Driver.Parse
	}
	dec := live.Live(func(o Output) {
		b, err := json.Marshal(fastOutput{Type: o.Type, Data: FastData(o.Data), Metadata: o.Metadata})
		if err == nil {
			publish(EventDisplay, string(b))
		}
	})
	return func(s sandbox.Stream, p []byte) {
		if s == sandbox.Channel {
			dec.Write(p)
			return
		}
		out(s, p)
	}, dec.Report
}
