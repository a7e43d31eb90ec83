package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrNoEntrypoint means an archive holds no Python file to run.
	ErrNoEntrypoint = errors.New("no Python file found to use as entrypoint")
	// ErrUnsafePath means a file name would land outside the workspace.
	ErrUnsafePath = errors.New("unsafe file name")
	// ErrUnexpectedStatus means the server answered with a success code
	// other than the one the API promises (e.g. 200 instead of 202).
	ErrUnexpectedStatus = errors.New("unexpected HTTP status")
	// ErrStreamEnded means an event stream ended before the final status.
	ErrStreamEnded = errors.New("event stream ended before the execution finished")
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// APIError is a non-2xx answer of the server.
type APIError struct {
	// StatusCode is the HTTP status code, e.g. 404.
	StatusCode int
	// Message is the server's explanation, from the body's "error" field
	// (or the status text when the body had none).
	Message string
	// RetryAfter is how long the server asked to wait before retrying
	// (429 and 503 answers); zero when it did not say.
	RetryAfter time.Duration
}

// Error returns the server's message and the status code.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.StatusCode)
}

// errorBody is the JSON of an error answer. pyexec and python-executor send
// {"error": ...}; the RFC 9457 fields are read too so that a proxy or a
// problem+json answer still yields a useful message.
type errorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
	Title  string `json:"title"`
}

// newAPIError builds the *APIError of a non-2xx response; now is the
// reference for an HTTP-date Retry-After.
func newAPIError(resp *http.Response, now time.Time) *APIError {
	e := &APIError{
		StatusCode: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), now),
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)) // a short read still leaves a usable message
	var body errorBody
	if json.Unmarshal(raw, &body) == nil {
		for _, m := range []string{body.Error, body.Detail, body.Title} {
			if m != "" {
				e.Message = m
				break
			}
		}
	} else if text := strings.TrimSpace(string(raw)); text != "" && !strings.HasPrefix(text, "<") {
		e.Message = text
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(resp.StatusCode))
		if e.Message == "" {
			e.Message = "unknown error"
		}
	}
	return e
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
