package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// retryAfterSeconds is what a client told 429 should wait before retrying:
// executions typically finish within seconds, so a short wait is right.
const retryAfterSeconds = 1

// Error is every error response of the API: the body is exactly
// {"error": "<message>"}, the wire format python-executor clients decode.
type Error struct {
	Status  int         `json:"-"`
	Message string      `json:"error" doc:"What went wrong" example:"execution not found"`
	headers http.Header `json:"-"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// GetStatus is the HTTP status code (huma.StatusError).
func (e *Error) GetStatus() int { return e.Status }

// GetHeaders are extra response headers such as Retry-After
// (huma.HeadersError).
func (e *Error) GetHeaders() http.Header { return e.headers }

// ContentType keeps errors plain JSON rather than problem+json
// (huma.ContentTypeFilter).
func (e *Error) ContentType(string) string { return "application/json" }

// errorf builds an *Error with status and a formatted message.
func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// engineError maps an error from the engine to the response the client
// sees. Details of unexpected errors are logged, never sent.
func engineError(log *slog.Logger, err error) error {
	if e := workspaceStatus(err); e != nil {
		return e
	}
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return errorf(http.StatusNotFound, "execution not found")
	case errors.Is(err, engine.ErrKeyOverloaded):
		// The text names the caller's limit and its flag.
		e := errorf(http.StatusTooManyRequests, "%s; retry later", err)
		e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
		return e
	case errors.Is(err, engine.ErrOverloaded):
		e := errorf(http.StatusTooManyRequests, "%s; retry later", engine.ErrOverloaded)
		e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
		return e
	case errors.Is(err, engine.ErrInvalid):
		return errorf(http.StatusBadRequest, "%s", invalidDetail(err))
	case errors.Is(err, engine.ErrClosed):
		return errorf(http.StatusServiceUnavailable, "%s", engine.ErrClosed)
	case errors.Is(err, engine.ErrUnavailable):
		e := errorf(http.StatusServiceUnavailable, "%s", strings.TrimPrefix(err.Error(), engine.ErrUnavailable.Error()+": "))
		e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
		return e
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this response.
		return errorf(http.StatusServiceUnavailable, "request canceled")
	}
	log.Error("engine call failed", "err", err)
	return errorf(http.StatusInternalServerError, "internal server error")
}

// invalidDetail is the caller-facing part of an engine.ErrInvalid error:
// the detail the engine wrapped around the sentinel, without the
// sentinel's own generic text.
func invalidDetail(err error) string {
	msg := err.Error()
	generic := engine.ErrInvalid.Error()
	if rest, ok := strings.CutPrefix(msg, generic+": "); ok {
		return rest
	}
	if rest, ok := strings.CutSuffix(msg, ": "+generic); ok {
		return rest
	}
	return msg
}

// humaErrors turns the errors huma produces itself (unparsable parameters,
// oversized bodies) into this API's format, per API instance rather than
// by replacing huma's package-level constructors. It is a huma.Transformer.
func humaErrors(maxBody int64) huma.Transformer {
	return func(ctx huma.Context, _ string, v any) (any, error) {
		m, ok := v.(*huma.ErrorModel)
		if !ok {
			return v, nil
		}
		ctx.SetHeader("Content-Type", "application/json")
		if m.Status == http.StatusRequestEntityTooLarge {
			// huma reports the read limit, which is one byte over ours.
			return &Error{Status: m.Status, Message: bodyTooLarge(maxBody)}, nil
		}
		msg := m.Detail
		var details []string
		for _, d := range m.Errors {
			if d != nil {
				details = append(details, d.Error())
			}
		}
		if len(details) > 0 {
			msg += ": " + strings.Join(details, "; ")
		}
		return &Error{Status: m.Status, Message: msg}, nil
	}
}

// bodyTooLarge is the 413 message for a request body over the cap.
func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body exceeds limit of %d bytes", limit)
}

// humaContext lets badRequestContext embed huma.Context: embedded under
// its own name, the field would clash with the method Context().
type humaContext = huma.Context

// badRequestContext makes huma's validation failures 400, as every client
// of this API expects, instead of huma's 422.
type badRequestContext struct{ humaContext }

func (c badRequestContext) SetStatus(code int) {
	if code == http.StatusUnprocessableEntity {
		code = http.StatusBadRequest
	}
	c.humaContext.SetStatus(code)
}

// validationAs400 is the huma middleware installing badRequestContext.
func validationAs400(ctx huma.Context, next func(huma.Context)) {
	next(badRequestContext{ctx})
}

// errorResponses documents the error statuses of an operation with this
// API's error body, replacing huma's problem+json default.
func errorResponses(reg huma.Registry, codes ...int) map[string]*huma.Response {
	schema := reg.Schema(reflect.TypeFor[Error](), true, "Error")
	out := make(map[string]*huma.Response, len(codes))
	for _, code := range codes {
		r := &huma.Response{
			Description: http.StatusText(code),
			Content:     map[string]*huma.MediaType{"application/json": {Schema: schema}},
		}
		if code == http.StatusTooManyRequests {
			r.Headers = map[string]*huma.Header{"Retry-After": {
				Description: "Seconds to wait before retrying",
				Schema:      &huma.Schema{Type: huma.TypeInteger},
			}}
		}
		out[strconv.Itoa(code)] = r
	}
	return out
}

// writeError renders e outside huma (middlewares, plain handlers).
func writeError(w http.ResponseWriter, e *Error) {
	for k, vs := range e.headers {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e) // the status is out; a failed write has no one to tell
}

// emptyTypedQuery rejects a query parameter the document types as a number
// or a boolean when it is given with an empty value (?version=). huma reads
// such a value as absent and applies the default, so a client that built
// the URL wrong got the current version, or 20 executions, instead of an
// error; the document says the value is an integer.
func emptyTypedQuery(hapi huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if name := emptyTypedParam(ctx); name != "" {
			_ = huma.WriteErr(hapi, ctx, http.StatusBadRequest,
				fmt.Sprintf("query parameter %q is empty; give it a value or leave it out", name))
			return
		}
		next(ctx)
	}
}

// emptyTypedParam names the first typed query parameter of the request's
// operation that is present with an empty value; "" when there is none.
func emptyTypedParam(ctx huma.Context) string {
	op := ctx.Operation()
	if op == nil {
		return ""
	}
	var query url.Values
	for _, p := range op.Parameters {
		if p == nil || p.In != "query" || p.Schema == nil || p.Schema.Type == huma.TypeString || p.Schema.Type == "" {
			continue
		}
		if query == nil {
			u := ctx.URL()
			query = u.Query()
		}
		if vs, ok := query[p.Name]; ok && slices.Contains(vs, "") {
			return p.Name
		}
	}
	return ""
}
