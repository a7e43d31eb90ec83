package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultTimeout bounds every call except Follow unless WithTimeout says
// otherwise.
const DefaultTimeout = 5 * time.Minute

// userAgent identifies this client in server logs.
const userAgent = "pyexec-go-client"

// Client talks to one pyexec (or python-executor) server. Create it with
// New; it is safe for concurrent use.
type Client struct {
	baseURL string
	http    *http.Client
	timeout time.Duration
	apiKey  string
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (for a
// proxy, TLS settings, tracing, or more connections kept alive: without
// it the client uses http.DefaultClient, which keeps two idle connections
// per host, so a program with more calls in flight opens a new connection
// for most of them; a Transport with MaxIdleConnsPerHost at its
// concurrency avoids that). A Timeout set on hc also cuts Follow streams;
// prefer WithTimeout, which leaves them alone.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithTimeout bounds each call (default DefaultTimeout); zero means no
// bound besides the caller's context. Follow is not bounded by it, since an
// event stream lasts as long as the execution.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithAPIKey sends key as "Authorization: Bearer <key>" on every request.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// New returns a client of the server at baseURL, e.g.
// "http://localhost:8080" (a trailing slash is allowed).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		http:    http.DefaultClient,
		timeout: DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// newRequest builds a request for path (which starts with "/").
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("building request %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// send performs req and turns a non-2xx answer into a *APIError. On
// success the caller owns resp.Body.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err // a *url.Error: it names the method and URL already
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, newAPIError(resp, time.Now())
	}
	return resp, nil
}

// call sends one request bounded by the client's timeout, checks that the
// answer has status want (any 2xx when want is 0) and decodes its JSON body
// into out (unless out is nil).
func (c *Client) call(ctx context.Context, method, path string, body []byte, contentType string, want int, out any) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := c.newRequest(ctx, method, path, r, contentType)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if want != 0 && resp.StatusCode != want {
		return fmt.Errorf("%s %s: %w: got %d, want %d", method, path, ErrUnexpectedStatus, resp.StatusCode, want)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding response: %w", method, path, err)
	}
	return nil
}
