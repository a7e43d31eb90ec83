package run

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"unicode"
)

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

// KeepOutputs returns the outputs that fit the bound of a record, in
// order, and whether any were left out.
func KeepOutputs(outs []Output) ([]Output, bool) {
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
