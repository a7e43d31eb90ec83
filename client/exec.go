package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"time"
)

// DefaultPollInterval is the interval WaitForCompletion uses when it is
// given none.
const DefaultPollInterval = 2 * time.Second

// ExecuteSync uploads tarData (an uncompressed tar, see the Tar* helpers),
// runs it as metadata says and waits for the result. A script that fails is
// still a result (Status completed with a non-zero ExitCode, or failed);
// the error is only for a request that did not produce one.
func (c *Client) ExecuteSync(ctx context.Context, tarData []byte, metadata *Metadata) (*ExecutionResult, error) {
	body, ct, err := multipartBody(tarData, metadata)
	if err != nil {
		return nil, err
	}
	var res ExecutionResult
	if err := c.call(ctx, http.MethodPost, "/api/v1/exec/sync", body, ct, 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecuteAsync uploads tarData, queues its execution and returns the
// execution ID at once. The server must answer 202 Accepted; any other
// status is an error.
func (c *Client) ExecuteAsync(ctx context.Context, tarData []byte, metadata *Metadata) (string, error) {
	body, ct, err := multipartBody(tarData, metadata)
	if err != nil {
		return "", err
	}
	var res struct {
		ExecutionID string `json:"execution_id"`
	}
	if err := c.call(ctx, http.MethodPost, "/api/v1/exec/async", body, ct, http.StatusAccepted, &res); err != nil {
		return "", err
	}
	if res.ExecutionID == "" {
		return "", fmt.Errorf("POST /api/v1/exec/async: response has no execution_id")
	}
	return res.ExecutionID, nil
}

// GetExecution returns the current state of an execution, with its output
// so far. An unknown ID is a *APIError with StatusCode 404.
func (c *Client) GetExecution(ctx context.Context, executionID string) (*ExecutionResult, error) {
	var res ExecutionResult
	if err := c.call(ctx, http.MethodGet, executionPath(executionID), nil, "", 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Kill asks the server to kill an execution and returns its status after
// the request: StatusKilled, or the state it was already in when it was no
// longer running.
func (c *Client) Kill(ctx context.Context, executionID string) (ExecutionStatus, error) {
	var res struct {
		Status ExecutionStatus `json:"status"`
	}
	if err := c.call(ctx, http.MethodDelete, executionPath(executionID), nil, "", 0, &res); err != nil {
		return "", err
	}
	return res.Status, nil
}

// KillExecution kills an execution; see Kill for the status it ended in.
func (c *Client) KillExecution(ctx context.Context, executionID string) error {
	_, err := c.Kill(ctx, executionID)
	return err
}

// WaitForCompletion polls an execution every pollInterval (DefaultPollInterval
// when zero or negative) until it reaches a final state, and returns it.
// Follow streams the same outcome without polling.
func (c *Client) WaitForCompletion(ctx context.Context, executionID string, pollInterval time.Duration) (*ExecutionResult, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		res, err := c.GetExecution(ctx, executionID)
		if err != nil {
			return nil, err
		}
		if res.Status.Final() {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", executionID, ctx.Err())
		case <-t.C:
		}
	}
}

// Eval runs code sent as JSON (no archive) and waits for the result.
func (c *Client) Eval(ctx context.Context, req *SimpleExecRequest) (*ExecutionResult, error) {
	if req == nil {
		req = &SimpleExecRequest{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding eval request: %w", err)
	}
	var res ExecutionResult
	if err := c.call(ctx, http.MethodPost, "/api/v1/eval", body, "application/json", 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Health asks the server whether it is up.
func (c *Client) Health(ctx context.Context) (*HealthStatus, error) {
	var res HealthStatus
	if err := c.call(ctx, http.MethodGet, "/health", nil, "", 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListExecutions returns one page of the server's executions, most recent
// first. Pass the page's Next as opts.Cursor to get the following page.
func (c *Client) ListExecutions(ctx context.Context, opts ListOptions) (*ExecutionList, error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", string(opts.Status))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := "/api/v1/executions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var res ExecutionList
	if err := c.call(ctx, http.MethodGet, path, nil, "", 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// executionPath is the resource path of one execution.
func executionPath(id string) string {
	return "/api/v1/executions/" + url.PathEscape(id)
}

// multipartBody encodes an execution request: a "metadata" form field
// holding the JSON of m, then a "tar" file part named code.tar.
func multipartBody(tarData []byte, m *Metadata) ([]byte, string, error) {
	if m == nil {
		m = &Metadata{}
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("encoding metadata: %w", err)
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.WriteField("metadata", string(meta)); err != nil {
		return nil, "", fmt.Errorf("writing metadata part: %w", err)
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="tar"; filename="code.tar"`)
	h.Set("Content-Type", "application/x-tar")
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, "", fmt.Errorf("writing tar part: %w", err)
	}
	if _, err := part.Write(tarData); err != nil {
		return nil, "", fmt.Errorf("writing tar part: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, "", fmt.Errorf("closing multipart body: %w", err)
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}
