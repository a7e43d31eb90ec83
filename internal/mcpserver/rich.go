package mcpserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// Caps of what run_python returns of rich outputs.
const (
	// maxImages is how many plots one result carries as image content.
	maxImages = 8
	// maxOutputText caps the text/plain and text/html of one output in
	// the structured content and the text.
	maxOutputText = 32 << 10
)

// OutputSummary is one rich output of a run (a display() call, a
// matplotlib figure, the last expression), without its image bytes, which
// come as image content.
type OutputSummary struct {
	Type      string   `json:"type" jsonschema:"display (a display() call or a matplotlib figure) or result (the value of the last expression)."`
	MIMETypes []string `json:"mime_types" jsonschema:"Media types the output has, e.g. image/png, text/html, application/json."`
	Text      string   `json:"text,omitempty" jsonschema:"Its text/plain form (the repr)."`
	HTML      string   `json:"html,omitempty" jsonschema:"Its text/html form, e.g. a DataFrame as a table."`
	JSON      any      `json:"json,omitempty" jsonschema:"Its application/json form; for a DataFrame: columns, records, total_rows and truncated."`
	Image     int      `json:"image,omitempty" jsonschema:"When the output is a picture: its number among the image contents of the result (1 is the first)."`
	Truncated bool     `json:"truncated,omitempty" jsonschema:"text or html was cut to fit."`
}

// rich is what run_python returns of an execution's rich outputs: the
// structured summaries, the images as content and the text describing
// them both.
type rich struct {
	outputs []OutputSummary
	images  []mcp.Content
	text    string
}

// newRich summarizes the rich outputs, results and files of r.
func newRich(r *client.ExecutionResult) rich {
	var out rich
	var b strings.Builder
	if len(r.Results) > 0 && string(r.Results) != "null" {
		fmt.Fprintf(&b, "--- results ---\n%s\n", r.Results)
	}
	for i, o := range r.Outputs {
		s := summarize(o)
		if mime, data, ok := o.Image(); ok && imageTypes[mime] {
			if len(out.images) < maxImages {
				out.images = append(out.images, &mcp.ImageContent{Data: data, MIMEType: mime})
				s.Image = len(out.images)
				fmt.Fprintf(&b, "--- output %d: %s, image %d below ---\n", i+1, mime, s.Image)
			} else {
				fmt.Fprintf(&b, "--- output %d: %s, left out (at most %d images per result) ---\n", i+1, mime, maxImages)
			}
		} else {
			fmt.Fprintf(&b, "--- output %d (%s) ---\n", i+1, strings.Join(s.MIMETypes, ", "))
			b.WriteString(s.Text)
			if !strings.HasSuffix(s.Text, "\n") {
				b.WriteByte('\n')
			}
		}
		out.outputs = append(out.outputs, s)
	}
	if r.OutputsTruncated {
		b.WriteString("[further outputs left out at the server's size limit]\n")
	}
	if len(r.Files) > 0 {
		fmt.Fprintf(&b, "--- files (read one with read_file, execution_id %s) ---\n", r.ExecutionID)
		writeFileLines(&b, newFileEntries(r.Files))
	}
	if r.FilesOmitted > 0 {
		fmt.Fprintf(&b, "[%d more file%s not collected: over the server's limits]\n", r.FilesOmitted, plural(r.FilesOmitted))
	}
	out.text = b.String()
	return out
}

// summarize keeps what a model can read of an output: its text, HTML and
// JSON forms, cut to size.
func summarize(o client.Output) OutputSummary {
	s := OutputSummary{Type: o.Type, MIMETypes: slices.Sorted(maps.Keys(o.Data))}
	if t, ok := o.Text("text/plain"); ok {
		s.Text, s.Truncated = cut(t, maxOutputText)
	}
	if h, ok := o.Text("text/html"); ok {
		var cutHTML bool
		s.HTML, cutHTML = cut(h, maxOutputText)
		s.Truncated = s.Truncated || cutHTML
	}
	if raw, ok := o.Data["application/json"]; ok {
		s.JSON = results(raw)
		if len(raw) > maxOutputText {
			s.JSON, s.Truncated = nil, true
		}
	}
	return s
}

// cut shortens s to at most max bytes on a rune boundary.
func cut(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	return string(trimToRune([]byte(s[:max]))), true
}

// results decodes the script's results dict for the structured content.
func results(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}
