package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress/http1"
)

// intercepts reports whether the egress takes part in the HTTP of
// connections to name on port, rather than relaying their bytes: when a
// secret of the execution or an HTTP rule of the operator names the
// destination. Without a CA to terminate TLS with, such a connection
// over TLS is refused (intercept), never relayed unchecked.
func (e *Egress) intercepts(name string, port uint16) bool {
	if name == "" {
		return false
	}
	for i := range e.grant.Secrets {
		if e.grant.Secrets[i].For(name, port) {
			return true
		}
	}
	for i := range e.cfg.HTTPRules {
		if e.cfg.HTTPRules[i].For(name, port) {
			return true
		}
	}
	return false
}

// ruledAddress reports whether a, connected to by address on port, is an
// address of a destination the egress intercepts: of a name a secret or
// an HTTP rule names exactly (resolved now), or of a name the execution
// looked up that one covers (wildcards included). Such a connection would
// reach the destination with no rule applied and is refused; wildcard
// names never looked up cannot be known (docs/network.md).
func (e *Egress) ruledAddress(a netip.Addr, port uint16) bool {
	if len(e.cfg.HTTPRules) == 0 && len(e.grant.Secrets) == 0 {
		return false
	}
	var names []string
	add := func(rules []Rule) {
		for _, r := range rules {
			if r.Host != "" && !strings.HasPrefix(r.Host, "*") && r.portOK(port) {
				names = append(names, r.Host)
			}
		}
	}
	for i := range e.grant.Secrets {
		add(e.grant.Secrets[i].Hosts)
	}
	for i := range e.cfg.HTTPRules {
		add(e.cfg.HTTPRules[i].Hosts)
	}
	for _, en := range e.names.entries() {
		if e.intercepts(en.name, port) && slices.Contains(en.real, a) {
			return true
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Limits.ConnectTimeout)
	defer cancel()
	for _, n := range names {
		addrs, err := e.cfg.Resolver.LookupNetIP(ctx, "ip", n)
		if err != nil {
			continue
		}
		for _, x := range addrs {
			if x.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// intercept serves a connection to a destination the egress intercepts:
// TLS is terminated (the payload's with a certificate of the server's CA
// for the name its ClientHello was checked to name, the destination's
// verified against the host's roots), plain HTTP is read the same way,
// and in both every request is read, checked and written again by
// proxyHTTP. Nothing else may reach such a destination. It returns a
// refusal reason, "" when the payload or the destination ended.
func (r *relay) intercept(down, up net.Conn, t target) string {
	op := inspect(down, t.name)
	switch {
	case op.reason != "":
		return op.reason
	case op.kind == streamHTTP:
		return r.proxyHTTP(down, up, op.first, op.until, t, false)
	case op.kind != streamTLS:
		return ReasonUnrecognised
	}
	ic := r.e.cfg.Intercept
	if ic == nil || ic.Issuer == nil {
		return ReasonNoTermination
	}
	if !r.e.terminate(t.name) {
		return ReasonTerminationLimit
	}
	ctx, cancel := context.WithTimeout(r.e.ctx, r.e.cfg.Limits.ConnectTimeout)
	defer cancel()
	// The destination first: a payload whose destination cannot be
	// reached safely sees its handshake fail, as it would without the
	// egress.
	uc := tls.Client(up, &tls.Config{ServerName: t.name, RootCAs: ic.Roots, NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12, ClientSessionCache: portSessions{r.e.sessions, t.port}})
	if err := uc.HandshakeContext(ctx); err != nil {
		return ReasonDestinationTLS
	}
	cert, err := ic.Issuer.Certificate(t.name)
	if err != nil {
		return ReasonPayloadTLS
	}
	// Only HTTP/1.1 is offered: a client that would speak HTTP/2 gets
	// HTTP/1.1, one that speaks only HTTP/2 gets no_application_protocol.
	held := &heldConn{Conn: &replayConn{Conn: down, r: io.MultiReader(bytes.NewReader(op.first), down)}}
	dc := tls.Server(held, &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	hctx, hcancel := context.WithTimeout(r.e.ctx, inspectTimeout)
	defer hcancel()
	if err := dc.HandshakeContext(hctx); err != nil {
		return ReasonPayloadTLS
	}
	return r.proxyHTTP(batchedTLS{Conn: dc, under: held}, uc, nil, time.Time{}, t, true)
}

// maxTerminatedNames bounds the names one execution has the egress
// terminate TLS for: each new one costs a key and a signature in the
// server's process, and a wildcard HTTP rule would let a payload walk
// through names.
const maxTerminatedNames = 64

// terminate records that the execution has name's TLS terminated; false
// when that would be a name past maxTerminatedNames.
func (e *Egress) terminate(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.terminated[name] && len(e.terminated) >= maxTerminatedNames {
		return false
	}
	e.terminated[name] = true
	return true
}

// replayConn is the payload's side of a connection whose first bytes were
// read already (the checked ClientHello): they are read again first.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// exchange is one request of an intercepted connection as it is
// forwarded.
type exchange struct {
	h        *http1.Head
	head     []byte    // as written to the destination
	injected []*Bound  // secrets whose value it carries
	expect   bool      // it asked for 100-continue, which the egress answers
	path     string    // for events
	until    time.Time // the deadline of its head (for the first)
}

// proxyHTTP serves the HTTP/1.x of an intercepted connection, one request
// at a time: each head is read strictly (http1) and must name t, as on
// any connection to a name; the operator's HTTP rules must allow its
// method and path (else 403); over TLS, a placeholder in the one place its
// secret's template puts it, for one of the secret's hosts, is replaced by
// the value (the field is rewritten, never added), and every other
// placeholder is reported and left as it is. The answer comes back with
// every secret value replaced by its placeholder. first is what was read
// of the stream already, until the deadline of its head.
func (r *relay) proxyHTTP(down, up net.Conn, first []byte, until time.Time, t target, secure bool) (reason string) {
	in := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(first), down), relayBuffer)
	defer func() {
		if reason != "" {
			linger(down, in)
		}
	}()
	out := bufio.NewWriterSize(down, relayBuffer)
	upR := bufio.NewReaderSize(&downstream{r: r, up: up}, relayBuffer)
	upW := bufio.NewWriterSize(&upstream{r: r, up: up}, relayBuffer)
	for {
		if until.IsZero() {
			// Between requests the payload may wait as long as it likes.
			if _, err := in.Peek(1); err != nil {
				return ""
			}
			until = time.Now().Add(inspectTimeout)
		}
		_ = down.SetReadDeadline(until)
		raw, h, err := http1.ReadHead(in)
		_ = down.SetReadDeadline(time.Time{})
		until = time.Time{}
		switch {
		case errors.Is(err, io.EOF):
			return ""
		case err != nil:
			respond(out, http.StatusBadRequest, ReasonBadHTTPRequest, "the request is not HTTP/1.x the egress can read strictly")
			return ReasonBadHTTPRequest
		}
		if reason := checkHead(h, t); reason != "" {
			status := http.StatusBadRequest
			if reason == ReasonHostMismatch {
				status = http.StatusMisdirectedRequest
			}
			respond(out, status, reason, "the request does not name "+t.name)
			return reason
		}
		if overrides(h) {
			r.e.emit(r.httpEvent(t, &exchange{h: h, path: eventPath(h.Method, h.Target, t.name, t.port)},
				VerdictDeny, ReasonOverrideHeader, 0))
			respond(out, http.StatusForbidden, ReasonOverrideHeader,
				"a request to "+t.name+" may not ask the destination to take another method or path than its request line's")
			return ReasonOverrideHeader
		}
		x := r.prepare(raw, h, t, secure)
		if !ruleVerdict(r.e.cfg.HTTPRules, t.name, t.port, h.Method, h.Target) {
			ev := r.httpEvent(t, x, VerdictDeny, ReasonHTTPRule, 0)
			for _, b := range x.injected {
				ev.Secret = b.Name
				r.e.emit(ev)
			}
			if len(x.injected) == 0 {
				r.e.emit(ev)
			}
			respond(out, http.StatusForbidden, ReasonHTTPRule,
				fmt.Sprintf("%s %s on %s is not allowed by the operator's HTTP rules", h.Method, x.path, t.name))
			return ReasonHTTPRule
		}
		body := in
		if formContent(h) {
			var reason string
			if body, reason = r.readForm(in, out, x, t); body == nil {
				return reason
			}
		}
		status, reason, keep := r.forward(body, out, upR, upW, x, t)
		for _, b := range x.injected {
			ev := r.httpEvent(t, x, VerdictAllow, "", status)
			ev.Secret = b.Name
			r.e.emit(ev)
		}
		if reason != "" || !keep {
			return reason
		}
	}
}

// readForm reads the whole of a request's form content (at most maxForm
// bytes of data) and refuses it when it asks for another method (a
// _method field, which frameworks read from forms as from queries), when
// it is larger, compressed, or does not parse as its Content-Type says.
// It returns the content as sent, to be forwarded, or nil and a refusal
// reason ("" when the payload went away).
func (r *relay) readForm(in *bufio.Reader, out *bufio.Writer, x *exchange, t target) (*bufio.Reader, string) {
	refuse := func(status int, reason, msg string) (*bufio.Reader, string) {
		r.e.emit(r.httpEvent(t, x, VerdictDeny, reason, 0))
		respond(out, status, reason, msg)
		return nil, reason
	}
	if x.h.Framing == http1.Length && x.h.Length > maxForm {
		return refuse(http.StatusRequestEntityTooLarge, ReasonFormContent,
			fmt.Sprintf("form content to %s is checked for _method and may be at most %d bytes", t.name, maxForm))
	}
	for _, f := range x.h.Fields {
		if fieldIs(f, "content-encoding") && !strings.EqualFold(f.Value, "identity") {
			return refuse(http.StatusBadRequest, ReasonFormContent,
				"form content to "+t.name+" is checked for _method and may not be compressed")
		}
	}
	if sendContinue(out, x) != nil {
		return nil, ""
	}
	raw, data := &capped{max: 8 * maxForm}, &capped{max: maxForm}
	switch err := http1.CopyBodySeen(raw, data, in, x.h); {
	case errors.Is(err, errFormTooLarge):
		return refuse(http.StatusRequestEntityTooLarge, ReasonFormContent,
			fmt.Sprintf("form content to %s is checked for _method and may be at most %d bytes", t.name, maxForm))
	case errors.Is(err, http1.ErrChunk):
		respond(out, http.StatusBadRequest, ReasonBadHTTPRequest, "the request's chunked content is not strict HTTP/1.1")
		return nil, ReasonBadHTTPRequest
	case err != nil:
		return nil, ""
	}
	switch override, err := formOverride(x.h, data.b.Bytes()); {
	case err != nil:
		return refuse(http.StatusBadRequest, ReasonFormContent,
			"form content to "+t.name+" does not parse as its Content-Type says")
	case override:
		return refuse(http.StatusForbidden, ReasonOverrideHeader,
			"a request to "+t.name+" may not ask the destination to take another method than its request line's (_method in its form content)")
	}
	return bufio.NewReader(bytes.NewReader(raw.b.Bytes())), ""
}

// sendContinue answers x's Expect: 100-continue (the egress removed it
// from the head it forwards), once.
func sendContinue(out *bufio.Writer, x *exchange) error {
	if !x.expect || x.h.Framing == http1.NoContent {
		return nil
	}
	x.expect = false
	_, _ = out.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	return out.Flush()
}

// errFormTooLarge is form content past its cap.
var errFormTooLarge = errors.New("form content too large")

// capped is a buffer that takes at most max bytes.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		return 0, errFormTooLarge
	}
	return c.b.Write(p)
}

// prepare rewrites a request head for the destination: a secret's
// placeholder where its template puts it becomes the value (over TLS, to
// one of the secret's hosts, in the only field of that name), a request
// to a secret's destination asks for no content coding (a response the
// egress could not read would carry the value past its redaction), and an
// Expect: 100-continue is answered by the egress instead. Placeholders
// found anywhere else are reported.
func (r *relay) prepare(raw []byte, h *http1.Head, t target, secure bool) *exchange {
	secrets := r.e.grant.Secrets
	x := &exchange{h: h, path: eventPath(h.Method, h.Target, t.name, t.port)}
	plain := r.plainResponses(t)
	var b bytes.Buffer
	b.WriteString(h.Method + " " + h.Target + " HTTP/1." + string(rune('0'+h.Minor)) + "\r\n")
	for _, f := range h.Fields {
		switch {
		case strings.EqualFold(f.Name, "expect") && strings.EqualFold(f.Value, "100-continue"):
			x.expect = true
			continue
		case plain && (fieldIs(f, "accept-encoding") || fieldIs(f, "range") || fieldIs(f, "if-range") ||
			fieldIs(f, "request-range")):
			// A part of a response could hold a part of a value, which
			// the redaction cannot know as the value's.
			continue
		}
		if s := r.injectable(h, f, t, secure); s != nil {
			x.injected = append(x.injected, s)
			f.Value = s.Prefix + s.Value.v + s.Suffix
		}
		b.WriteString(f.Name + ": " + f.Value + "\r\n")
	}
	if plain {
		b.WriteString("Accept-Encoding: identity\r\n")
	}
	b.WriteString("\r\n")
	x.head = b.Bytes()
	for _, s := range placeholdersIn(raw, secrets) {
		if len(x.injected) > 0 && containsBound(x.injected, s) && count(raw, s.Placeholder) == 1 {
			continue
		}
		r.placeholderEvent(t, x, s, placeholderWhere(h, s, t, secure))
	}
	return x
}

// injectable returns the secret whose value replaces f's: f is the only
// field of its name in h, its value is exactly the secret's template with
// the placeholder, and the connection is TLS to one of the secret's
// hosts.
func (r *relay) injectable(h *http1.Head, f http1.Field, t target, secure bool) *Bound {
	if !secure {
		return nil
	}
	for i := range r.e.grant.Secrets {
		s := &r.e.grant.Secrets[i]
		if strings.EqualFold(f.Name, s.Header) && f.Value == s.Prefix+s.Placeholder+s.Suffix &&
			s.For(t.name, t.port) && fieldCount(h, s.Header) == 1 {
			return s
		}
	}
	return nil
}

// placeholderWhere tells why a placeholder found in a request head was
// not replaced.
func placeholderWhere(h *http1.Head, s *Bound, t target, secure bool) string {
	if strings.Contains(strings.ToLower(h.Target), s.Placeholder) {
		return ReasonPlaceholderInURL
	}
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, s.Header) && f.Value == s.Prefix+s.Placeholder+s.Suffix {
			switch {
			case !s.For(t.name, t.port):
				return ReasonPlaceholderOtherHost
			case !secure:
				return ReasonPlaceholderPlainHTTP
			}
		}
	}
	return ReasonPlaceholderInHeader
}

// plainResponses reports whether responses from t must come without a
// content coding: t is a destination of one of the execution's secrets.
func (r *relay) plainResponses(t target) bool {
	for i := range r.e.grant.Secrets {
		if r.e.grant.Secrets[i].For(t.name, t.port) {
			return true
		}
	}
	return false
}

// forward sends x and its content to the destination and its answer (and
// any 1xx before it) to the payload, with every secret value redacted. It
// returns the answer's status, a refusal reason, and whether the
// connection may carry another request.
func (r *relay) forward(in *bufio.Reader, out *bufio.Writer, upR *bufio.Reader, upW *bufio.Writer, x *exchange, t target) (status int, reason string, keep bool) {
	if _, err := upW.Write(x.head); err != nil {
		return 0, "", false
	}
	if sendContinue(out, x) != nil {
		return 0, "", false
	}
	scan := newPlaceholderScan(r.e.grant.Secrets)
	var seen io.Writer = scan
	if coveredByRules(r.e.cfg.HTTPRules, t) {
		seen = io.MultiWriter(scan, &overrideScan{})
	}
	if err := http1.CopyBodySeen(upW, seen, in, x.h); err != nil {
		switch {
		case errors.Is(err, http1.ErrChunk):
			return 0, ReasonBadHTTPRequest, false
		case errors.Is(err, errOverrideInContent):
			// The content stops before its end: the destination never
			// gets a whole request to act on.
			r.e.emit(r.httpEvent(t, x, VerdictDeny, ReasonOverrideHeader, 0))
			respond(out, http.StatusForbidden, ReasonOverrideHeader,
				"a request to "+t.name+" may not carry _method in its content: the destination could take another method than its request line's")
			return 0, ReasonOverrideHeader, false
		}
		return 0, "", false
	}
	for _, s := range scan.Found() {
		r.placeholderEvent(t, x, s, ReasonPlaceholderInBody)
	}
	if upW.Flush() != nil {
		return 0, "", false
	}
	secrets := r.e.grant.Secrets
	for {
		raw, resp, err := http1.ReadResponse(upR, x.h.Method)
		switch {
		case errors.Is(err, io.EOF):
			return 0, "", false
		case err != nil || resp.Status == http.StatusSwitchingProtocols || x.h.Minor == 0 && resp.Framing == http1.Chunked:
			respond(out, http.StatusBadGateway, ReasonBadHTTPResponse, "the destination's answer is not HTTP/1.x the egress can read strictly")
			return 0, ReasonBadHTTPResponse, false
		case r.plainResponses(t) && !identity(resp):
			respond(out, http.StatusBadGateway, ReasonEncodedResponse,
				"the destination answered in a content coding the egress cannot redact secrets in")
			return resp.Status, ReasonEncodedResponse, false
		case r.plainResponses(t) && partial(resp):
			respond(out, http.StatusBadGateway, ReasonPartialResponse,
				"the destination answered with a part of a resource, in which the egress cannot redact secrets")
			return resp.Status, ReasonPartialResponse, false
		}
		// After content the destination may not have read it all (a
		// server may answer any method, POST included, before its
		// content): what it left would be read as the start of the next
		// request, which the egress never checked, with the next head's
		// fields (a secret's value among them) as its own. The connection
		// ends with this response, so that a request the egress forwards
		// is always what the destination reads.
		last := resp.Status >= 200 && hasContent(x.h)
		head := bytes.Clone(raw)
		if last {
			head = closingHead(raw, resp)
		}
		redactAll(head, secrets)
		if _, err := out.Write(head); err != nil {
			return resp.Status, "", false
		}
		if resp.Status < 200 {
			if out.Flush() != nil {
				return resp.Status, "", false
			}
			continue
		}
		if err := copyContent(out, upR, resp, secrets); err != nil {
			return resp.Status, "", false
		}
		closeAfter := last || resp.Close || x.h.Minor == 0 || hasToken(x.h, "Connection", "close")
		return resp.Status, "", !closeAfter
	}
}

// downstream reads what the destination sends, counted against the
// limits.
type downstream struct {
	r  *relay
	up net.Conn
}

func (d *downstream) Read(p []byte) (int, error) {
	n, err := d.up.Read(p)
	if n > 0 && !d.r.count(n, false) {
		return n, errOverLimit
	}
	return n, err
}

// lingerBytes and lingerTime bound what the egress reads and drops of a
// request it refused before reading its content, before it closes the
// connection: a payload still sending that content then reads the refusal,
// where a close with unread data would reset the connection under it.
const (
	lingerBytes = 256 << 10
	lingerTime  = time.Second
)

// linger reads and drops what the payload is still sending on down (at
// most lingerBytes, for at most lingerTime), after a refusal was written.
func linger(down net.Conn, in *bufio.Reader) {
	_ = down.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, in, lingerBytes)
}

// respond writes the egress's own response to the payload and flushes it:
// the connection ends after it.
func respond(out *bufio.Writer, status int, reason, msg string) {
	body := "pyexec egress: " + msg + " (" + reason + ")\n"
	fmt.Fprintf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"+
		"Connection: close\r\nX-Pyexec-Egress: %s\r\n\r\n%s", status, http.StatusText(status), len(body), reason, body)
	_ = out.Flush()
}

// httpEvent is the event of a request of an intercepted connection.
func (r *relay) httpEvent(t target, x *exchange, verdict, reason string, status int) Event {
	r.mu.Lock()
	addr := r.ev.Addr
	r.mu.Unlock()
	return Event{Proto: "http", Host: t.name, Addr: addr, Port: t.port, Verdict: verdict, Reason: reason,
		Method: x.h.Method, Path: x.path, Status: status}
}

// placeholderEvent reports s's placeholder found where it is not replaced.
func (r *relay) placeholderEvent(t target, x *exchange, s *Bound, reason string) {
	ev := r.httpEvent(t, x, VerdictDeny, reason, 0)
	ev.Secret = s.Name
	r.e.emit(ev)
}

// identity reports whether a response's content is as is: every
// Content-Encoding field it has (a client would apply them all) says
// identity.
func identity(resp *http1.Response) bool {
	for _, f := range resp.Fields {
		if fieldIs(f, "content-encoding") && !strings.EqualFold(f.Value, "identity") {
			return false
		}
	}
	return true
}

// partial reports whether a response carries a part of a resource (206,
// or multipart/byteranges whatever its status).
func partial(resp *http1.Response) bool {
	if resp.Status == http.StatusPartialContent {
		return true
	}
	for _, f := range resp.Fields {
		if fieldIs(f, "content-type") && strings.Contains(strings.ToLower(f.Value), "multipart/byteranges") {
			return true
		}
	}
	return false
}

// coveredByRules reports whether an HTTP rule covers t.
func coveredByRules(rules []HTTPRule, t target) bool {
	for i := range rules {
		if rules[i].For(t.name, t.port) {
			return true
		}
	}
	return false
}

// closingHead is a response head written again with Connection: close in
// place of its Connection and Keep-Alive fields.
func closingHead(raw []byte, resp *http1.Response) []byte {
	line, _, _ := bytes.Cut(raw, []byte("\r\n"))
	var b bytes.Buffer
	b.Write(line)
	b.WriteString("\r\n")
	for _, f := range resp.Fields {
		if !fieldIs(f, "connection") && !fieldIs(f, "keep-alive") {
			b.WriteString(f.Name + ": " + f.Value + "\r\n")
		}
	}
	b.WriteString("Connection: close\r\n\r\n")
	return b.Bytes()
}

// hasToken reports whether a field of h called name lists tok.
func hasToken(h *http1.Head, name, tok string) bool {
	for _, f := range h.Fields {
		if strings.EqualFold(f.Name, name) {
			for _, v := range strings.Split(f.Value, ",") {
				if strings.EqualFold(strings.TrimSpace(v), tok) {
					return true
				}
			}
		}
	}
	return false
}

// fieldCount counts the fields of h called name, with '_' taken as '-'
// (a CGI-style server would merge X_Api_Key into X-Api-Key).
func fieldCount(h *http1.Head, name string) int {
	n := 0
	for _, f := range h.Fields {
		if fieldIs(f, strings.ToLower(name)) {
			n++
		}
	}
	return n
}

func containsBound(list []*Bound, s *Bound) bool {
	for _, b := range list {
		if b == s {
			return true
		}
	}
	return false
}

// count counts placeholder in b, in any ASCII case.
func count(b []byte, placeholder string) int {
	return bytes.Count(bytes.ToLower(b), []byte(placeholder))
}

// portSessions keys an execution's TLS sessions by name and port (Go's
// key is the name alone), so a session begun with one service of a host
// is offered only to that service, not to another port of the host.
type portSessions struct {
	c    tls.ClientSessionCache
	port uint16
}

func (p portSessions) key(name string) string { return name + "|" + strconv.Itoa(int(p.port)) }

func (p portSessions) Get(name string) (*tls.ClientSessionState, bool) { return p.c.Get(p.key(name)) }

func (p portSessions) Put(name string, cs *tls.ClientSessionState) { p.c.Put(p.key(name), cs) }
