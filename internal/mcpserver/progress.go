package mcpserver

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
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
// marked as such), installer lines as "install: ...", status changes as
// "status: running", rich outputs by their media types.
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
	case client.EventInstall:
		prefix = "install: "
	case client.EventDisplay:
		p.display(ctx, ev)
		return
	default:
		return
	}
	for _, chunk := range splitText(ev.Data, maxProgressMessage) {
		if !p.send(ctx, prefix+chunk) {
			return
		}
	}
}

// display reports a rich output by its media types (its content comes
// with the result): "display: image/png, text/plain".
func (p *progress) display(ctx context.Context, ev client.Event) {
	o, err := ev.Output()
	if err != nil {
		p.log.Debug("run_python: undecodable display event", "err", err)
		return
	}
	p.send(ctx, "display: "+strings.Join(slices.Sorted(maps.Keys(o.Data)), ", "))
}

// send sends one notification and reports whether it went out.
func (p *progress) send(ctx context.Context, msg string) bool {
	p.n++
	err := p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token,
		Progress:      p.n,
		Message:       msg,
	})
	if err != nil {
		// The client may have gone; the call itself notices that.
		p.log.Debug("sending progress", "err", err)
		return false
	}
	return true
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
