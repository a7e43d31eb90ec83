package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// inProcess is an http.RoundTripper that serves requests with a handler in
// this process, streaming the response body as the handler writes it (so
// that event streams work) and recording caller as the request's caller.
type inProcess struct {
	handler http.Handler
	caller  callerInfo
}

// RoundTrip runs the handler in a goroutine that ends when the handler
// returns; closing the response body cancels the handler's context and
// fails its pending writes, so the goroutine never outlives the response.
func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(context.WithValue(ctx, callerKey{}, t.caller))
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "in-process"
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.start(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("handler panic: %v", p))
				return
			}
			w.start(http.StatusOK)
			pw.Close()
		}()
		t.handler.ServeHTTP(w, r)
	}()
	select {
	case <-w.started:
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		cancel()
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &cancelBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// cancelBody is a response body whose Close ends the handler.
type cancelBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(errors.New("response body closed"))
}

// pipeResponse is the http.ResponseWriter of an in-process request. The
// status and a copy of the header are published once, on the first write,
// flush or explicit WriteHeader.
type pipeResponse struct {
	header  http.Header
	body    *io.PipeWriter
	once    sync.Once
	started chan struct{}
	status  int
	sent    http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(status int) { w.start(status) }

func (w *pipeResponse) start(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.body.Write(p)
}

// Flush has nothing to do: every Write reaches the reader directly.
func (w *pipeResponse) Flush() { w.start(http.StatusOK) }
