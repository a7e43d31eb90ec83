package egress

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// maxForm bounds the form content the egress reads whole, to look for a
// method override in it, before it forwards a request to a destination
// with a secret or an HTTP rule. Larger form content is refused there.
const maxForm = 64 << 10

// overrides reports whether a request asks the destination to take
// another method or path than its request line's: method-override
// fields, URL-rewrite fields, or a _method query parameter, which many
// frameworks and gateways honour. A destination with a secret or an HTTP
// rule gets none of them: the rules, and the events, see only the request
// line. A query key is read as the frameworks read it (overrideKey), and
// the query is split on ';' as well as '&'.
func overrides(h *http1.Head) bool {
	for _, f := range h.Fields {
		for _, name := range []string{"x-http-method-override", "x-http-method", "x-method-override",
			"x-original-url", "x-rewrite-url", "x-original-method"} {
			if fieldIs(f, name) {
				return true
			}
		}
	}
	_, query, _ := strings.Cut(h.Target, "?")
	return formOverrides(query)
}

// formOverrides reports whether URL-encoded pairs (a query, or form
// content) hold a _method key as a framework would read it.
func formOverrides(pairs string) bool {
	for _, p := range strings.FieldsFunc(pairs, func(r rune) bool { return r == '&' || r == ';' }) {
		k, _, _ := strings.Cut(p, "=")
		if overrideKey(strings.ReplaceAll(k, "+", " "), true) {
			return true
		}
	}
	return false
}

// overrideKey reports whether a form key is _method as one of the common
// frameworks reads it: percent-decoded (when encoded; an invalid escape
// is kept as it is, as PHP does), in any case, alone or before a '[' (an
// array of that name), and also with '.', ' ' and '[' taken as '_' and
// with leading spaces dropped (PHP).
func overrideKey(k string, encoded bool) bool {
	if encoded {
		k = percentDecode(k)
	}
	php := func(k string) string {
		return strings.Map(func(r rune) rune {
			if r == '.' || r == ' ' || r == '[' {
				return '_'
			}
			return r
		}, k)
	}
	for _, name := range []string{k, php(k), php(strings.TrimLeft(k, " "))} {
		if before, _, _ := strings.Cut(name, "["); strings.EqualFold(before, "_method") {
			return true
		}
	}
	return false
}

// percentDecode decodes the %XX escapes of s, keeping any other '%'.
func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// formContent reports whether a request's content may be read as a form
// by the destination: it has a Content-Type naming URL-encoded or
// multipart content, or none at all (Rack reads a POST without one as a
// form).
func formContent(h *http1.Head) bool {
	if !hasContent(h) {
		return false
	}
	typed := false
	for _, f := range h.Fields {
		if fieldIs(f, "content-type") {
			typed = true
			v := strings.ToLower(f.Value)
			if strings.Contains(v, "x-www-form-urlencoded") || strings.Contains(v, "multipart/") {
				return true
			}
		}
	}
	return !typed
}

// errFormUnreadable is form content the egress cannot read as its
// Content-Type says.
var errFormUnreadable = errors.New("form content that cannot be read")

// formOverride reports whether form content (its data, without chunk
// framing) holds a _method field: as URL-encoded pairs, and as the parts
// of multipart content for the boundary of each multipart Content-Type of
// h. Multipart content that does not parse is errFormUnreadable.
func formOverride(h *http1.Head, content []byte) (bool, error) {
	if formOverrides(string(content)) {
		return true, nil
	}
	for _, f := range h.Fields {
		if !fieldIs(f, "content-type") || !strings.Contains(strings.ToLower(f.Value), "multipart/") {
			continue
		}
		_, params, err := mime.ParseMediaType(f.Value)
		if err != nil || params["boundary"] == "" {
			return false, errFormUnreadable
		}
		mr := multipart.NewReader(bytes.NewReader(content), params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return false, errFormUnreadable
			}
			_, dp, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
			if err != nil {
				return false, errFormUnreadable
			}
			if overrideKey(dp["name"], false) {
				return true, nil
			}
		}
	}
	return false, nil
}

// errOverrideInContent stops a request's content that names _method.
var errOverrideInContent = errors.New("_method in a request's content")

// overrideScan fails as soon as the content written to it holds
// "_method" or "%5Fmethod" (any case), also split across writes: form and
// JSON bodies carry the method override of Rails, Laravel and the like,
// which HTTP rules, checking the request line, would not see.
type overrideScan struct{ tail []byte }

func (o *overrideScan) Write(p []byte) (int, error) {
	buf := bytes.ToLower(append(o.tail, p...))
	if bytes.Contains(buf, []byte("_method")) || bytes.Contains(buf, []byte("%5fmethod")) {
		return 0, errOverrideInContent
	}
	const keep = len("%5fmethod") - 1
	if len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	o.tail = append(o.tail[:0], buf...)
	return len(p), nil
}
