package mcpserver

import (
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/client"
)

// renderResult is the text a model reads after run_python: a status line,
// the error if any, then stdout and stderr under headers. The Python
// client's tool helper (python/pyexec_client/tools.py) renders the same
// layout.
func renderResult(r *client.ExecutionResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s, exit code %d", r.Status, r.ExitCode)
	if r.DurationMs > 0 {
		fmt.Fprintf(&b, ", %d ms", r.DurationMs)
	}
	b.WriteByte('\n')
	if r.ErrorType != "" || r.Error != "" {
		b.WriteString("error: ")
		b.WriteString(r.ErrorType)
		if r.ErrorType != "" && r.Error != "" {
			b.WriteString(": ")
		}
		b.WriteString(r.Error)
		if r.ErrorLine > 0 {
			fmt.Fprintf(&b, " (line %d)", r.ErrorLine)
		}
		b.WriteByte('\n')
	}
	section(&b, "stdout", r.Stdout, r.StdoutTruncated)
	section(&b, "stderr", r.Stderr, r.StderrTruncated)
	if r.Stdout == "" && r.Stderr == "" {
		b.WriteString("(no output)\n")
	}
	return b.String()
}

// section writes one output stream under a header, if it is not empty.
func section(b *strings.Builder, name, text string, truncated bool) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	if truncated {
		fmt.Fprintf(b, "[%s truncated at the server's output limit]\n", name)
	}
}
