package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// sessionStreamError is the data of the error event that ends a streamed
// session create.
type sessionStreamError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// CreateSessionWithProgress starts a session like CreateSession and calls
// progress with each line of installer output while the server builds
// the session's environment (its requirements over the base environment).
// progress runs on the calling goroutine; nil ignores the lines. The call
// waits as long as the install takes: bound it with ctx, not WithTimeout.
// A session the server refuses is a *APIError with the status the plain
// create would have answered.
func (c *Client) CreateSessionWithProgress(ctx context.Context, req *SessionRequest, progress func(line string)) (*Session, error) {
	if req == nil {
		req = &SessionRequest{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, "/api/v1/sessions", bytes.NewReader(body), "application/json")
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := c.send(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A server that does not stream answers the session itself.
		var s Session
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return nil, fmt.Errorf("decoding the session: %w", err)
		}
		return &s, nil
	}
	r := newSSEReader(resp.Body)
	for {
		msg, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended before the session was created")
			} else if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("creating a session: %w", err)
		}
		switch msg.event {
		case string(EventInstall):
			ev, err := decodeEvent(msg)
			if err != nil {
				return nil, err
			}
			if progress != nil {
				progress(ev.Data)
			}
		case "session":
			var s Session
			if err := json.Unmarshal([]byte(msg.data), &s); err != nil {
				return nil, fmt.Errorf("decoding the session: %w", err)
			}
			return &s, nil
		case "error":
			var e sessionStreamError
			if err := json.Unmarshal([]byte(msg.data), &e); err != nil {
				return nil, fmt.Errorf("decoding the error: %w", err)
			}
			return nil, &APIError{StatusCode: e.Status, Message: e.Error}
		}
	}
}
