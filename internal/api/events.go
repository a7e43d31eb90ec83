package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// ndjsonType is the media type that selects NDJSON instead of SSE.
const ndjsonType = "application/x-ndjson"

// Event is one live event on the wire: an SSE frame's data, or an NDJSON
// line.
type Event struct {
	Seq  uint64 `json:"seq" doc:"Starts at 1, no gaps; resume with Last-Event-ID or ?after="`
	Type string `json:"type" enum:"status,stdout,stderr,install,display,network"`
	Data string `json:"data" doc:"Output text, the new status (the last status event is final), a line of installer progress while the execution's environment is built, for display the JSON of an Output, or for network the JSON of a NetworkEvent"`
	Time Time   `json:"time"`
}

type eventsInput struct {
	ID          string `path:"id"`
	After       uint64 `query:"after" maximum:"9223372036854775807" doc:"Send only events with a larger seq"`
	LastEventID string `header:"Last-Event-ID" doc:"Set by EventSource on reconnect; wins over after"`
	Accept      string `header:"Accept" doc:"application/x-ndjson for NDJSON; SSE otherwise"`
}

func (s *Server) registerEvents(hapi huma.API) {
	o := op(hapi, "execution-events", http.MethodGet, "/api/v1/executions/{id}/events",
		"Follow an execution's output and status live",
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusTooManyRequests,
		http.StatusInternalServerError)
	o.Tags = []string{"executions"}
	o.Description = "Server-Sent Events (id: seq, event: type, data: Event JSON) by default, NDJSON with " +
		"Accept: application/x-ndjson. Replays from the start (or after a seq) and ends after the final status event. " +
		"Streams open at once are capped per execution and per API key (429 with Retry-After beyond)."
	schema := hapi.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Event](), true, "Event")
	o.Responses["200"] = &huma.Response{
		Description: "Event stream",
		Content: map[string]*huma.MediaType{
			"text/event-stream": {Schema: sseEventSchema(schema)},
			ndjsonType:          {Schema: schema},
		},
	}
	huma.Register(hapi, o, func(ctx context.Context, in *eventsInput) (*huma.StreamResponse, error) {
		after := in.After
		if in.LastEventID != "" {
			n, err := strconv.ParseUint(strings.TrimSpace(in.LastEventID), 10, 64)
			if err != nil {
				return nil, errorf(http.StatusBadRequest, "Last-Event-ID must be an event seq (a non-negative integer), got %q", in.LastEventID)
			}
			after = n
		}
		// The stream outlives this function (huma calls Body afterwards,
		// within the same request) and must also end when the server
		// shuts down.
		sctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.streams, cancel)
		events, err := s.eng.Follow(sctx, callerFrom(ctx).engine(), in.ID, after)
		if err != nil {
			stop()
			cancel()
			return nil, engineError(s.log, err)
		}
		// Counted once Follow found the execution, so that a cap never
		// answers for an id the caller may not see.
		release, err := s.followers.acquire(in.ID, callerFrom(ctx).Name)
		if err != nil {
			stop()
			cancel()
			return nil, err
		}
		format := formatSSE
		if strings.Contains(in.Accept, ndjsonType) {
			format = formatNDJSON
		}
		return &huma.StreamResponse{Body: func(hctx huma.Context) {
			defer release()
			defer cancel()
			defer stop()
			s.stream(sctx, hctx, events, format)
		}}, nil
	})
}

// sseEventSchema describes one frame of the SSE stream (the shape of the
// OpenAPI 3.2 itemSchema): id is the seq, event the type, data the Event as
// JSON (event, the JSON Schema of that content).
func sseEventSchema(event *huma.Schema) *huma.Schema {
	return &huma.Schema{
		Type:     huma.TypeObject,
		Required: []string{"id", "event", "data"},
		Properties: map[string]*huma.Schema{
			"id":    {Type: huma.TypeString, Pattern: "^[0-9]+$", Description: "The event's seq"},
			"event": {Type: huma.TypeString, Enum: []any{"status", "stdout", "stderr", "install", "display", "network"}},
			"data": {Type: huma.TypeString, Description: "The Event as JSON",
				Extensions: map[string]any{"contentMediaType": "application/json", "contentSchema": event}},
		},
	}
}

// streamFormat is the wire format of an event stream.
type streamFormat int

const (
	formatSSE streamFormat = iota
	formatNDJSON
)

func (f streamFormat) contentType() string {
	if f == formatNDJSON {
		return ndjsonType
	}
	return "text/event-stream"
}

// write frames one event: an SSE frame whose id is the seq (so that
// EventSource resumes with Last-Event-ID), or one NDJSON line. The JSON
// goes straight to w (Encode ends it with the line's newline), without a
// copy of the event per follower.
func (f streamFormat) write(w io.Writer, ev Event) error {
	if f == formatSSE {
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: ", ev.Seq, ev.Type); err != nil {
			return err
		}
	}
	if err := json.NewEncoder(w).Encode(ev); err != nil {
		return err
	}
	if f == formatSSE {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}

// heartbeat keeps idle connections open through proxies. NDJSON has no
// comment syntax, so it sends nothing rather than a fake event.
func (f streamFormat) heartbeat(w io.Writer) error {
	if f == formatNDJSON {
		return nil
	}
	_, err := io.WriteString(w, ": heartbeat\n\n")
	return err
}

// startStream answers 200 with the headers of a stream of contentType and
// returns the response writer with its controller, for flushing each
// message. It logs, naming the stream what, and reports false when the
// writer cannot flush.
func (s *Server) startStream(hctx huma.Context, contentType, what string) (http.ResponseWriter, *http.ResponseController, bool) {
	hctx.SetHeader("Content-Type", contentType)
	hctx.SetHeader("Cache-Control", "no-cache")
	hctx.SetHeader("X-Accel-Buffering", "no") // let reverse proxies stream
	hctx.SetStatus(http.StatusOK)
	w, ok := hctx.BodyWriter().(http.ResponseWriter)
	if !ok {
		s.log.Error(what + ": response writer cannot flush")
		return nil, nil, false
	}
	return w, http.NewResponseController(w), true
}

// stream writes events until the final status event, the end of the
// channel or of ctx, flushing each one and sending heartbeats meanwhile.
func (s *Server) stream(ctx context.Context, hctx huma.Context, events <-chan engine.Event, format streamFormat) {
	w, rc, ok := s.startStream(hctx, format.contentType(), "event stream")
	if !ok {
		return
	}
	flush := func() bool { return rc.Flush() == nil }
	if !flush() {
		return
	}
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := format.heartbeat(w); err != nil || !flush() {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			out := Event{Seq: ev.Seq, Type: string(ev.Type), Data: ev.Data, Time: wireTime(ev.Time)}
			if err := format.write(w, out); err != nil || !flush() {
				return
			}
			if ev.Type == engine.EventStatus && engine.Status(ev.Data).Final() {
				return
			}
		}
	}
}
