package egress

import (
	"strings"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// The request's head as the HTTP rules (portable) and the interceptor
// (Linux) both read it.

// fieldIs reports whether f is called name (lower case), taking '_' as
// '-' as CGI-style servers do.
func fieldIs(f http1.Field, name string) bool {
	return len(f.Name) == len(name) && strings.EqualFold(strings.ReplaceAll(f.Name, "_", "-"), name)
}

// hasContent reports whether a request has content (which a server may
// answer unread).
func hasContent(h *http1.Head) bool {
	return h.Framing == http1.Chunked || h.Framing == http1.Length && h.Length > 0
}
