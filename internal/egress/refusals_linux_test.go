package egress

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// pyRefusals is the payload of TestInterceptRefusals.
const pyRefusals = pyProbe + `
import http.client, os, socket, ssl, urllib.request, urllib.error
CA = "/work/ca.pem"
TOKEN = os.environ["GITHUB_TOKEN"]
AUTH = {"Authorization": "Bearer " + TOKEN}
def ctx():
    return ssl.create_default_context(cafile=CA)
def raw(host, method, target, headers={}, body=None, chunked=False):
    c = http.client.HTTPSConnection(host, 443, timeout=10, context=ctx())
    c.request(method, target, headers=headers, body=iter([body[:3], body[3:]]) if chunked else body, encode_chunked=chunked)
    r = c.getresponse()
    body = r.read().decode()
    return f"{r.status} {body}" if r.status < 300 else f"{r.status} {r.headers.get('X-Pyexec-Egress')}"
def ranged():
    req = urllib.request.Request("https://allowed.test/range", headers={**AUTH, "Range": "bytes=0-9", "If-Range": "x",
        "Request-Range": "bytes=0-9"})
    with urllib.request.urlopen(req, timeout=10, context=ctx()) as r:
        return f"{r.status} {r.read().decode()}"
def desync(method):
    # Content (on DELETE, or POST) holding the start of a request, then a request
    # the egress would put the value in, on one connection: a server that
    # left the content unread would glue the two.
    s = ctx().wrap_socket(socket.create_connection(("allowed.test", 443), timeout=10), server_hostname="allowed.test")
    smuggled = b"GET /admin HTTP/1.1\r\nHost: allowed.test\r\nX-Pad: "
    s.sendall(method + b" /auth HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n\r\n" % len(smuggled) + smuggled +
              b"GET /auth HTTP/1.1\r\nHost: allowed.test\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except (ssl.SSLError, ConnectionError):
            break
        if not b:
            break
        data += b
    lines = data.split(b"\r\n\r\n")[0].decode().split("\r\n")
    return f"{lines[0]}|{'Connection: close' in lines}|{data.count(b'HTTP/1.1 ')}"
def by_address(port):
    s = socket.create_connection(("` + egresstest.PublicHost + `", port), timeout=5)
    s.sendall(b"GET /admin HTTP/1.1\r\nHost: other.test\r\n\r\n")
    return s.recv(100).decode().split("\r\n")[0] or "EOF"
probe("plain", lambda: raw("other.test", "GET", "/repos/x"))
probe("override_method", lambda: raw("other.test", "GET", "/repos/x", {"X-HTTP-Method-Override": "DELETE"}))
probe("override_method2", lambda: raw("other.test", "GET", "/repos/x", {"X-HTTP-Method": "DELETE"}))
probe("override_method3", lambda: raw("other.test", "GET", "/repos/x", {"X-Method-Override": "DELETE"}))
probe("override_underscore", lambda: raw("other.test", "GET", "/repos/x", {"X_HTTP_Method_Override": "DELETE"}))
probe("override_url", lambda: raw("other.test", "GET", "/repos/x", {"X-Original-URL": "/admin"}))
probe("rewrite_url", lambda: raw("other.test", "GET", "/repos/x", {"X-Rewrite-URL": "/admin"}))
probe("override_query", lambda: raw("other.test", "GET", "/repos/x?a=1&_method=DELETE"))
probe("override_q5f", lambda: raw("other.test", "GET", "/repos/x?%5Fmethod=DELETE"))
probe("override_qdot", lambda: raw("other.test", "GET", "/repos/x?a=1;.method=DELETE"))
FORM = {**AUTH, "Content-Type": "application/x-www-form-urlencoded"}
MULTI = b'--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'
probe("form_method", lambda: raw("allowed.test", "POST", "/auth", FORM, b"a=1&_method=DELETE"))
probe("form_method_chunked", lambda: raw("allowed.test", "POST", "/auth", FORM, b"a=1&%5Fmethod=DELETE", True))
probe("multipart_method", lambda: raw("allowed.test", "POST", "/auth", {**AUTH, "Content-Type": "multipart/form-data; boundary=b"}, MULTI))
probe("untyped_method", lambda: raw("allowed.test", "POST", "/auth", AUTH, b"_method=DELETE"))
probe("form_large", lambda: raw("allowed.test", "POST", "/auth", FORM, b"a=" + b"x" * 200000))
probe("form", lambda: raw("allowed.test", "POST", "/auth", FORM, b"a=1&b=2"))
probe("form_chunked", lambda: raw("allowed.test", "POST", "/auth", FORM, b"a=1&b=2", True))
probe("override_query_encoded", lambda: raw("other.test", "GET", "/repos/x?a=1;%5Fmethod=DELETE"))
PLAIN_FORM = {"Content-Type": "application/x-www-form-urlencoded"}
probe("post_plain", lambda: raw("other.test", "POST", "/repos/x", PLAIN_FORM, b"a=1&method=GET"))
probe("override_body", lambda: raw("other.test", "POST", "/repos/x", PLAIN_FORM, b"a=1&_method=DELETE"))
probe("override_secret", lambda: raw("allowed.test", "GET", "/auth", {**AUTH, "X-HTTP-Method-Override": "DELETE"}))
probe("ranged", ranged)
probe("partial", lambda: raw("allowed.test", "GET", "/partial", AUTH))
probe("desync", lambda: desync(b"DELETE"))
probe("desync_post", lambda: desync(b"POST"))
probe("by_address_443", lambda: by_address(443))
probe("by_address_80", lambda: by_address(80))
`

// TestInterceptRefusals: on destinations with a secret or an HTTP rule,
// method and URL override fields and _method (in the query however a
// framework would decode its key, and in form content, which is read
// whole up to its cap and then forwarded as sent) are refused with their
// reason before anything reaches the destination; Range and If-Range
// never reach a secret's destination and a partial answer from it is
// refused rather than passed on; content on any method (POST included)
// ends the connection after its answer, so nothing the payload sends
// after it reaches the destination on that connection (the value is not
// injected into it, nor logged as sent); and such a destination cannot
// be reached by its address, where no rule would apply.
func TestInterceptRefusals(t *testing.T) {
	w, cfg, files := interceptWorld(t, "allowed.test", "other.test", egresstest.PublicHost)
	hosts, err := ParseRules([]string{"other.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPRules = []HTTPRule{{Hosts: hosts, Methods: []string{"GET", "POST"}, Paths: []string{"/repos/"}}}
	b := githubToken(t)
	res, rec := runGranted(t, w, cfg, Grant{Policy: cfg.Policy, Secrets: []Bound{b}},
		sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", pyRefusals}, Files: files,
			Env: []string{"GITHUB_TOKEN=" + b.Placeholder}})
	got := egresstest.Lines(string(res.Stdout))
	override := "403 " + ReasonOverrideHeader
	h := egresstest.Hash
	form := "200 1 " + h("Bearer "+testSecretValue) + " " + h("") + " " + h("a=1&b=2")
	want := map[string]string{
		"plain":               "200 hello other.test",
		"override_method":     override,
		"override_method2":    override,
		"override_method3":    override,
		"override_underscore": override,
		"override_url":        override,
		"rewrite_url":         override,
		"override_query":      override,
		"override_q5f":        override,
		"override_qdot":       override,
		// _method in form content (or in content a framework reads as a
		// form) is refused too; other form content goes, whole.
		"form_method":         override,
		"form_method_chunked": override,
		"multipart_method":    override,
		"untyped_method":      override,
		// Over maxForm, refused from its head while the payload still
		// sends it: the payload reads the 413 (the egress drops what it
		// is sent before closing, linger), not a reset connection.
		"form_large":   "413 " + ReasonFormContent,
		"form":         form,
		"form_chunked": form,
		// Percent-encoded after ';', a form without _method, and one with it
		// to a ruled host.
		"override_query_encoded": override,
		"post_plain":             "200 hello other.test",
		"override_body":          override,
		"override_secret":        override,
		// Range stripped: the whole reflection, redacted.
		"ranged":  "200 Bearer " + b.Placeholder,
		"partial": "502 " + ReasonPartialResponse,
		// One answer, marked as the connection's last; the request after
		// the content never went.
		"desync":      "HTTP/1.1 200 OK|True|1",
		"desync_post": "HTTP/1.1 200 OK|True|1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"by_address_443", "by_address_80"} {
		if !strings.HasPrefix(got[k], "ERR ") {
			t.Errorf("%s: got %q, want the connection refused", k, got[k])
		}
	}
	if n := rec.count(func(e Event) bool { return e.Host == egresstest.PublicHost && e.Reason == ReasonRuledAddress }); n != 2 {
		t.Errorf("%d %s events, want 2", n, ReasonRuledAddress)
	}
	if n := rec.count(func(e Event) bool { return e.Proto == "http" && e.Reason == ReasonOverrideHeader }); n != 16 {
		t.Errorf("%d %s events, want 16", n, ReasonOverrideHeader)
	}
	if !rec.find("http", "allowed.test", VerdictDeny, ReasonFormContent) {
		t.Errorf("no %s event", ReasonFormContent)
	}
	if !rec.find("tcp", "allowed.test", VerdictDeny, ReasonPartialResponse) {
		t.Errorf("no %s event", ReasonPartialResponse)
	}
	// The value went only with the requests the egress checked and sent:
	// ranged, partial, the two forms, and the DELETE and POST (which
	// carried no placeholder); never the requests sent after their
	// content, nor those refused.
	injections := rec.count(func(e Event) bool { return e.Proto == "http" && e.Verdict == VerdictAllow && e.Secret == b.Name })
	if injections != 4 {
		t.Errorf("%d injections, want 4 (ranged, partial, form, form_chunked)", injections)
	}
	noValue(t, res, rec)
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s\nevents: %+v", res.Stdout, res.Stderr, rec.events)
	}
}

// TestTerminationLimit: one execution has the egress terminate TLS for at
// most maxTerminatedNames names; a name it had terminated stays usable.
func TestTerminationLimit(t *testing.T) {
	e := &Egress{terminated: map[string]bool{}}
	for i := range maxTerminatedNames {
		if !e.terminate(fmt.Sprintf("n%d.example.test", i)) {
			t.Fatalf("name %d refused", i+1)
		}
	}
	if e.terminate("one-more.example.test") {
		t.Errorf("name %d accepted", maxTerminatedNames+1)
	}
	if !e.terminate("n0.example.test") {
		t.Error("a name already terminated was refused")
	}
}
