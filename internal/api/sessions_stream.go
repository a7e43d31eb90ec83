package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// sseType is the media type of Server-Sent Events.
const sseType = "text/event-stream"

// maxPendingInstallLines bounds the installer lines waiting for a slow
// stream reader; beyond it lines are dropped (the outcome never is).
const maxPendingInstallLines = 256

// SessionStreamError is the data of the `error` event that ends a
// streamed session create.
type SessionStreamError struct {
	Error  string `json:"error" doc:"What went wrong"`
	Status int    `json:"status" doc:"The HTTP status the same request answers without streaming"`
}

// documentCreateSession describes both answers of the create: the
// session as JSON (201), or the event stream (200).
func (s *Server) documentCreateSession(hapi huma.API, o *huma.Operation) {
	reg := hapi.OpenAPI().Components.Schemas
	info := reg.Schema(reflect.TypeFor[SessionInfo](), true, "SessionInfo")
	event := reg.Schema(reflect.TypeFor[Event](), true, "Event")
	streamErr := reg.Schema(reflect.TypeFor[SessionStreamError](), true, "SessionStreamError")
	o.Responses["201"] = &huma.Response{Description: "The session",
		Content: map[string]*huma.MediaType{"application/json": {Schema: info}}}
	o.Responses["200"] = &huma.Response{Description: "With Accept: text/event-stream: install events, then a session or an error event",
		Content: map[string]*huma.MediaType{sseType: {Schema: &huma.Schema{
			Type:     huma.TypeObject,
			Required: []string{"event", "data"},
			Properties: map[string]*huma.Schema{
				"event": {Type: huma.TypeString, Enum: []any{"install", "session", "error"}},
				"data": {Type: huma.TypeString, Description: "JSON: an Event (install), the SessionInfo (session) or a SessionStreamError (error)",
					OneOf: []*huma.Schema{event, info, streamErr}},
			},
		}}}}
}

// writeJSON answers v as JSON with status.
func writeJSON(hctx huma.Context, status int, v any) {
	hctx.SetHeader("Content-Type", "application/json")
	hctx.SetStatus(status)
	json.NewEncoder(hctx.BodyWriter()).Encode(v)
}

// createSessionStream creates the session while streaming the installer's
// lines as SSE install events, then ends with a session or an error
// event. A session created for a client that went away is deleted.
func (s *Server) createSessionStream(hctx huma.Context, se SessionEngine, req engine.SessionRequest) {
	ctx := hctx.Context()
	w, rc, ok := s.startStream(hctx, sseType, "session create stream")
	if !ok {
		return
	}
	lines := make(chan string, maxPendingInstallLines)
	req.Progress = func(line string) {
		select {
		case lines <- line:
		default:
		}
	}
	type outcome struct {
		info engine.Session
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		info, err := se.CreateSession(ctx, req)
		done <- outcome{info, err}
	}()
	alive := rc.Flush() == nil
	send := func(event string, v any) {
		if !alive {
			return
		}
		b, err := json.Marshal(v)
		if err == nil {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		}
		alive = err == nil && rc.Flush() == nil
	}
	install := func(line string) {
		send(string(engine.EventInstall), Event{Type: string(engine.EventInstall), Data: line, Time: wireTime(time.Now())})
	}
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case line := <-lines:
			install(line)
		case <-tick.C:
			if alive {
				_, err := io.WriteString(w, ": keep-alive\n\n")
				alive = err == nil && rc.Flush() == nil
			}
		case o := <-done:
			for len(lines) > 0 {
				install(<-lines)
			}
			if o.err != nil {
				send("error", streamError(s, o.err))
				return
			}
			send("session", newSessionInfo(o.info))
			if !alive {
				s.dropUnclaimedSession(se, o.info)
			}
			return
		}
	}
}

// streamError is the error event for err: the status and message the
// plain call would answer.
func streamError(s *Server, err error) SessionStreamError {
	var e *Error
	if errors.As(sessionError(s, err), &e) {
		return SessionStreamError{Error: e.Message, Status: e.Status}
	}
	return SessionStreamError{Error: "internal server error", Status: http.StatusInternalServerError}
}

// dropUnclaimedSession deletes a session whose creator is gone before it
// learnt the session's id: nobody else could ever use it.
func (s *Server) dropUnclaimedSession(se SessionEngine, info engine.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := se.DeleteSession(ctx, info.ID, engine.Caller{Name: info.Caller, Admin: true}); err != nil && !errors.Is(err, engine.ErrSessionNotFound) {
		s.log.Warn("deleting a session its creator did not wait for", "session_id", info.ID, "err", err)
	}
}
