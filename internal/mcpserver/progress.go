package mcpserver

import (
	"context"
	"log/slog"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// maxProgressMessage bounds the text of one progress notification; longer
// output is split over several.
const maxProgressMessage = 4 << 10

// progress sends a call's live events to the client as progress
// notifications, when the client asked for them with a progress token.
type progress struct {
	session *mcp.ServerSession
	token   any
	log     *slog.Logger
	n       float64 // notifications sent so far: the progress value
}

func newProgress(req *mcp.CallToolRequest, log *slog.Logger) *progress {
	p := &progress{log: log}
	if req != nil && req.Params != nil {
		p.session, p.token = req.Session, req.Params.GetProgressToken()
	}
	return p
}

// event reports one execution event: output chunks as they are (stderr
// marked as such), status changes as "status: running".
func (p *progress) event(ctx context.Context, ev client.Event) {
	if p.token == nil || p.session == nil {
		return
	}
	prefix := ""
	switch ev.Type {
	case client.EventStdout:
	case client.EventStderr:
		prefix = "stderr: "
	case client.EventStatus:
		prefix = "status: "
	default:
		return
	}
	for _, chunk := range splitText(ev.Data, maxProgressMessage) {
		p.n++
		err := p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.token,
			Progress:      p.n,
			Message:       prefix + chunk,
		})
		if err != nil {
			// The client may have gone; the call itself notices that.
			p.log.Debug("run_python: sending progress", "err", err)
			return
		}
	}
}

// splitText cuts s into pieces of at most max bytes, never inside a UTF-8
// sequence.
func splitText(s string, max int) []string {
	var out []string
	for len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = max
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}
