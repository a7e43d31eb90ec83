package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
)

// Follow streams the live events of an execution from
// GET /api/v1/executions/{id}/events: stdout and stderr chunks as they are
// written and every status change. For a finished execution the server
// replays them from the start. The sequence ends after the final status
// event; a failure (including a stream that ends early, ErrStreamEnded) is
// yielded once as the error of the last pair. Follow is bounded by ctx only,
// not by WithTimeout.
//
//	for ev, err := range c.Follow(ctx, id) {
//		if err != nil {
//			return err
//		}
//		fmt.Print(ev.Data)
//	}
func (c *Client) Follow(ctx context.Context, executionID string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		path := executionPath(executionID) + "/events"
		req, err := c.newRequest(ctx, http.MethodGet, path, nil, "")
		if err != nil {
			yield(Event{}, err)
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.send(req)
		if err != nil {
			yield(Event{}, err)
			return
		}
		defer resp.Body.Close()
		r := newSSEReader(resp.Body)
		for {
			msg, err := r.next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = ErrStreamEnded
				} else if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(Event{}, fmt.Errorf("following %s: %w", executionID, err))
				return
			}
			ev, err := decodeEvent(msg)
			if err != nil {
				yield(Event{}, fmt.Errorf("following %s: %w", executionID, err))
				return
			}
			if !yield(ev, nil) || ev.Final() {
				return
			}
		}
	}
}

// decodeEvent reads the JSON payload of one message; the SSE id and event
// fields fill in what the payload leaves out.
func decodeEvent(msg sseMessage) (Event, error) {
	var ev Event
	if err := json.Unmarshal([]byte(msg.data), &ev); err != nil {
		return Event{}, fmt.Errorf("decoding event %q: %w", msg.id, err)
	}
	if ev.Type == "" {
		ev.Type = EventType(msg.event)
	}
	if ev.Seq == 0 && msg.id != "" {
		if seq, err := strconv.ParseUint(msg.id, 10, 64); err == nil {
			ev.Seq = seq
		}
	}
	return ev, nil
}
