package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// testSecretValue is the operator's credential in the tests: what must never
// reach the payload.
const testSecretValue = "ghp_S3cr3tV4lue-0123456789-abcdefXYZ"

// interceptWorld is the test world with an egress CA (which the jail
// trusts besides the world's own) and the world's CA as the roots the
// egress verifies destinations with (--network-ca).
func interceptWorld(t *testing.T, allow ...string) (*egresstest.World, Config, []sandbox.File) {
	t.Helper()
	w := egresstest.New(t)
	ca, err := tlsca.New()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(w.CAPEM) {
		t.Fatal("the world's CA does not parse")
	}
	cfg := testConfig(t, w, allow...)
	cfg.Intercept = &Interception{Issuer: ca, Roots: roots}
	files := []sandbox.File{{Path: "ca.pem", Data: append(slices.Clone(w.CAPEM), ca.CertPEM()...)}}
	return w, cfg, files
}

// githubToken is a secret for allowed.test on 443 in an Authorization
// header, bound to a fresh placeholder.
func githubToken(t *testing.T) Bound {
	t.Helper()
	hosts, err := ParseRules([]string{"allowed.test:443"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Secret{Name: "GITHUB_TOKEN", Value: NewValue(testSecretValue), Hosts: hosts,
		Header: "Authorization", Prefix: "Bearer "}.Bind()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pySecrets is the payload of TestSecretInjection: each probe prints what
// the test host reports it received (egresstest.Hash) or what the payload
// read back.
const pySecrets = pyProbe + `
import os, socket, ssl, subprocess, urllib.request, urllib.error, http.client, sys
CA = "/work/ca.pem"
TOKEN = os.environ.get("GITHUB_TOKEN", sys.argv[1] if len(sys.argv) > 1 else "")
AUTH = {"Authorization": "Bearer " + TOKEN}
def get(url, headers=AUTH, data=None, method=None):
    ctx = ssl.create_default_context(cafile=CA)
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.headers.get('X-Pyexec-Egress')}"
def keep_alive():
    c = http.client.HTTPSConnection("allowed.test", 443, timeout=10, context=ssl.create_default_context(cafile=CA))
    out = []
    for _ in range(2):
        c.request("GET", "/auth", headers=AUTH)
        out.append(c.getresponse().read().decode())
    return "|".join(out)
def reflect():
    ctx = ssl.create_default_context(cafile=CA)
    with urllib.request.urlopen(urllib.request.Request("https://allowed.test/reflect", headers=AUTH), timeout=10, context=ctx) as r:
        return r.headers.get("X-Reflect") + "|" + r.read().decode()
def curl():
    return subprocess.run(["curl", "-sS", "--cacert", CA, "-H", "Authorization: Bearer " + TOKEN,
        "https://allowed.test/auth"], capture_output=True, text=True, timeout=20).stdout
def twice():
    c = http.client.HTTPSConnection("allowed.test", 443, timeout=10, context=ssl.create_default_context(cafile=CA))
    c.putrequest("GET", "/auth")
    c.putheader("Authorization", "Bearer " + TOKEN)
    c.putheader("Authorization", "Bearer " + TOKEN)
    c.endheaders()
    return c.getresponse().read().decode()
probe("urllib", lambda: get("https://allowed.test/auth"))
probe("keep_alive", keep_alive)
probe("curl", curl)
probe("reflect", reflect)
probe("other_host", lambda: get("https://other.test/auth"))
probe("plain_http", lambda: get("http://allowed.test/auth"))
probe("in_url", lambda: get("https://allowed.test/auth?token=" + TOKEN, headers={}))
probe("in_body", lambda: get("https://allowed.test/auth", headers={}, data=("token=" + TOKEN).encode()))
probe("other_header", lambda: get("https://allowed.test/auth", headers={"X-Token": TOKEN}))
probe("twice", twice)
probe("gzip", lambda: get("https://allowed.test/gzip"))
probe("dns", lambda: socket.getaddrinfo(TOKEN + ".allowed.test", 443))
try:
    import requests, httpx
except ImportError:
    sys.exit(0)
probe("requests", lambda: requests.get("https://allowed.test/auth", headers=AUTH, verify=CA, timeout=10).text)
probe("httpx", lambda: httpx.get("https://allowed.test/auth", headers=AUTH, verify=ssl.create_default_context(cafile=CA), timeout=10).text)
`

// TestSecretInjection: a secret's value reaches its destination (as
// urllib, http.client, curl, requests and httpx send it) in place of the
// placeholder the payload holds, and nothing the payload reads back holds
// it, even from a destination that reflects it. The placeholder sent
// anywhere else (another host, plain HTTP, a URL, content, another
// header, a second Authorization field, DNS) is not replaced and is
// reported; a response the egress could not redact is refused.
func TestSecretInjection(t *testing.T) {
	w, cfg, files := interceptWorld(t, "allowed.test", "other.test")
	b := githubToken(t)
	spec := sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", pySecrets}, Files: files,
		Env: []string{"GITHUB_TOKEN=" + b.Placeholder}}
	clients := os.Getenv(egresstest.ClientsEnv)
	if clients != "" {
		spec.Env = append(spec.Env, "PYTHONPATH="+clients)
		spec.Mounts = []sandbox.Mount{{Source: clients}}
	}
	res, rec := runGranted(t, w, cfg, Grant{Policy: cfg.Policy, Secrets: []Bound{b}}, spec)
	got := egresstest.Lines(string(res.Stdout))

	h := egresstest.Hash
	injected := "1 " + h("Bearer "+testSecretValue) + " " + h("") + " " + h("")
	kept := "1 " + h("Bearer "+b.Placeholder) + " " + h("") + " " + h("")
	want := map[string]string{
		"urllib":       injected,
		"keep_alive":   injected + "|" + injected,
		"curl":         injected,
		"reflect":      "Bearer " + b.Placeholder + "|Bearer " + b.Placeholder + "|Bearer " + b.Placeholder,
		"other_host":   kept,
		"plain_http":   kept,
		"in_url":       "0 " + h("") + " " + h("token="+b.Placeholder) + " " + h(""),
		"in_body":      "0 " + h("") + " " + h("") + " " + h("token="+b.Placeholder),
		"other_header": "0 " + h("") + " " + h("") + " " + h(""),
		"twice":        "2 " + h("Bearer "+b.Placeholder) + " " + h("") + " " + h(""),
		"gzip":         "502 " + ReasonEncodedResponse,
		"dns":          "ERR gaierror [Errno -2] Name or service not known",
	}
	if clients != "" {
		want["requests"], want["httpx"] = injected, injected
	} else {
		t.Log("requests and httpx not installed: their probes skipped")
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// Each placeholder out of place is reported, with its reason.
	for _, c := range []struct{ host, reason string }{
		{"allowed.test", ReasonPlaceholderOtherHost}, // plain_http: port 80 is not the secret's
		{"allowed.test", ReasonPlaceholderInURL},
		{"allowed.test", ReasonPlaceholderInBody},
		{"allowed.test", ReasonPlaceholderInHeader}, // other_header, twice
		{b.Placeholder + ".allowed.test", ReasonPlaceholderInDNS},
	} {
		if !rec.findSecret(c.host, c.reason, b.Name) {
			t.Errorf("no %s event for %s", c.reason, c.host)
		}
	}
	if !rec.find("tcp", "allowed.test", VerdictDeny, ReasonEncodedResponse) {
		t.Errorf("no %s event", ReasonEncodedResponse)
	}
	injections := rec.count(func(e Event) bool {
		return e.Proto == "http" && e.Verdict == VerdictAllow && e.Secret == b.Name && e.Path == "/auth" && e.Status == 200
	})
	if min := 4; injections < min {
		t.Errorf("%d injection events, want at least %d", injections, min)
	}
	noValue(t, res, rec)
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s\nevents: %+v", res.Stdout, res.Stderr, rec.events)
	}
}

// TestOtherExecutionsPlaceholder: an execution without the secret gets no
// placeholder, and another execution's placeholder it sends is not
// replaced, whether or not it has the secret itself.
func TestOtherExecutionsPlaceholder(t *testing.T) {
	w, cfg, files := interceptWorld(t, "allowed.test")
	first := githubToken(t)
	code := pyProbe + `
import os, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile="/work/ca.pem")
print("env=" + str("GITHUB_TOKEN" in os.environ))
def get():
    req = urllib.request.Request("https://allowed.test/auth", headers={"Authorization": "Bearer " + sys.argv[1]})
    return urllib.request.urlopen(req, timeout=10, context=ctx).read().decode()
probe("auth", get)
`
	kept := "1 " + egresstest.Hash("Bearer "+first.Placeholder) + " " + egresstest.Hash("") + " " + egresstest.Hash("")
	for _, c := range []struct {
		name    string
		secrets []Bound
	}{{"without secrets", nil}, {"with its own placeholder", []Bound{githubToken(t)}}} {
		t.Run(c.name, func(t *testing.T) {
			spec := sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", code, first.Placeholder}, Files: files}
			res, rec := runGranted(t, w, cfg, Grant{Policy: cfg.Policy, Secrets: c.secrets}, spec)
			got := egresstest.Lines(string(res.Stdout))
			if got["env"] != "False" || got["auth"] != kept {
				t.Errorf("got %v, want env=False auth=%s\nstderr:\n%s", got, kept, res.Stderr)
			}
			noValue(t, res, rec)
		})
	}
}

// pyRules is the payload of TestHTTPRules.
const pyRules = pyProbe + `
import http.client, ssl, subprocess, urllib.request, urllib.error
CA = "/work/ca.pem"
def raw(method, target, headers={}):
    c = http.client.HTTPSConnection("other.test", 443, timeout=10, context=ssl.create_default_context(cafile=CA))
    c.request(method, target, headers=headers)
    r = c.getresponse()
    body = r.read().decode()
    return body if r.status == 200 else f"{r.status} {r.headers.get('X-Pyexec-Egress')}"
def get(url, method="GET"):
    ctx = ssl.create_default_context(cafile=CA)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10, context=ctx) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.headers.get('X-Pyexec-Egress')}"
def curl(*args):
    return subprocess.run(["curl", "-sS", "--cacert", CA, *args, "-w", " %{http_version}", "https://other.test/repos/x"],
        capture_output=True, text=True, timeout=20).stdout
probe("allowed", lambda: get("https://other.test/repos/x"))
probe("method", lambda: get("https://other.test/repos/x", method="DELETE"))
probe("path", lambda: get("https://other.test/admin"))
probe("dot_segments", lambda: get("https://other.test/repos/../admin"))
probe("encoded_slash", lambda: get("https://other.test/repos%2F..%2Fadmin"))
probe("plain_http", lambda: get("http://other.test/admin"))
probe("untouched", lambda: get("https://allowed.test/admin"))
probe("curl_http2", lambda: curl("--http2"))
probe("query_scheme", lambda: raw("DELETE", "/user/keys/123?x=https://a/repos/"))
probe("path_scheme", lambda: raw("GET", "/admin://x/repos/"))
probe("absolute_other", lambda: raw("GET", "https://allowed.test/repos/x"))
probe("absolute_same", lambda: raw("GET", "https://other.test/repos/x"))
`

// TestHTTPRules: on a destination with HTTP rules only what they list
// passes (a forbidden method or path gets the egress's 403 and an event,
// also on plain HTTP and with dot segments or encoded slashes), other
// destinations are untouched, and a client that asks for HTTP/2 over the
// terminated TLS gets HTTP/1.1.
func TestHTTPRules(t *testing.T) {
	w, cfg, files := interceptWorld(t, "allowed.test", "other.test")
	hosts, err := ParseRules([]string{"other.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPRules = []HTTPRule{{Hosts: hosts, Methods: []string{"GET"}, Paths: []string{"/repos/"}}}
	res, rec := runGranted(t, w, cfg, Grant{Policy: cfg.Policy},
		sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", pyRules}, Files: files})
	got := egresstest.Lines(string(res.Stdout))
	refused := "403 " + ReasonHTTPRule
	want := map[string]string{
		"allowed":       "hello other.test",
		"method":        refused,
		"path":          refused,
		"dot_segments":  refused,
		"encoded_slash": refused,
		"plain_http":    refused,
		"untouched":     "hello allowed.test",
		"curl_http2":    "hello other.test 1.1",
		// A scheme in an origin-form target's query or path says nothing
		// of the path served; absolute-form must name the destination.
		"query_scheme":   refused,
		"path_scheme":    refused,
		"absolute_other": "421 " + ReasonHostMismatch,
		"absolute_same":  "hello other.test",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for _, path := range []string{"/repos/x", "/admin", "/user/keys/123", "/admin://x/repos/"} {
		if rec.count(func(e Event) bool {
			return e.Proto == "http" && e.Reason == ReasonHTTPRule && e.Host == "other.test" && e.Path == path
		}) == 0 {
			t.Errorf("no %s event for %s", ReasonHTTPRule, path)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s\nevents: %+v", res.Stdout, res.Stderr, rec.events)
	}

	// Without a CA the rules cannot be applied over TLS: the connection
	// is refused, never relayed unchecked. Plain HTTP still gets them.
	cfg.Intercept = nil
	res, rec = runGranted(t, w, cfg, Grant{Policy: cfg.Policy},
		sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", pyRules}, Files: files})
	got = egresstest.Lines(string(res.Stdout))
	if !strings.HasPrefix(got["allowed"], "ERR ") || got["untouched"] != "hello allowed.test" ||
		got["plain_http"] != refused || !rec.find("tcp", "other.test", VerdictDeny, ReasonNoTermination) {
		t.Errorf("without a CA: %v, events %+v", got, rec.events)
	}
}

// noValue fails the test if the secret's value, or its base64 or hex
// form, is in anything the payload or the record could show: its output
// and the events.
func noValue(t *testing.T, res sandbox.Result, rec *recorder) {
	t.Helper()
	rec.mu.Lock()
	events, err := json.Marshal(rec.events)
	rec.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{testSecretValue, base64.StdEncoding.EncodeToString([]byte(testSecretValue)),
		base64.RawURLEncoding.EncodeToString([]byte(testSecretValue)), hex.EncodeToString([]byte(testSecretValue))} {
		for where, b := range map[string][]byte{"stdout": res.Stdout, "stderr": res.Stderr, "events": events} {
			if bytes.Contains(b, []byte(form)) {
				t.Errorf("the value (as %q) is in the %s", form, where)
			}
		}
	}
}

// findSecret reports whether an event refused s's placeholder at host
// for reason.
func (r *recorder) findSecret(host, reason, secret string) bool {
	return r.count(func(e Event) bool { return e.Host == host && e.Reason == reason && e.Secret == secret }) > 0
}

// count counts the events f accepts.
func (r *recorder) count(f func(Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if f(e) {
			n++
		}
	}
	return n
}

// escapedSecretValue is a value with characters every JSON and URL
// encoder escapes, as base64-shaped credentials have.
const escapedSecretValue = `ghp_S3cr3t+V4lue/0123"456\789<abc>&def=`

// TestSecretEncodedEchoes: a destination that reflects the value JSON-
// or percent-encoded (in its content and in a header) gives the payload,
// once it decodes the echo as any client would, no value: the encoded
// forms are redacted too.
func TestSecretEncodedEchoes(t *testing.T) {
	w, cfg, files := interceptWorld(t, "allowed.test")
	hosts, err := ParseRules([]string{"allowed.test:443"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Secret{Name: "GITHUB_TOKEN", Value: NewValue(escapedSecretValue), Hosts: hosts,
		Header: "Authorization", Prefix: "Bearer "}.Bind()
	if err != nil {
		t.Fatal(err)
	}
	code := pyProbe + `
import json, os, ssl, urllib.parse, urllib.request
ctx = ssl.create_default_context(cafile="/work/ca.pem")
AUTH = {"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"]}
def get(path):
    return urllib.request.urlopen(urllib.request.Request("https://allowed.test" + path, headers=AUTH), timeout=10, context=ctx)
def query():
    r = get("/echo/query")
    body = urllib.parse.parse_qs(r.read().decode())["authorization"][0]
    loc = urllib.parse.parse_qs(r.headers["Location"].split("?", 1)[1])["authorization"][0]
    return body + "|" + loc
probe("json", lambda: json.loads(get("/echo/json").read())["authorization"])
probe("query", query)
`
	res, rec := runGranted(t, w, cfg, Grant{Policy: cfg.Policy, Secrets: []Bound{b}},
		sandbox.Spec{Argv: []string{"/usr/bin/python3", "-c", code}, Files: files,
			Env: []string{"GITHUB_TOKEN=" + b.Placeholder}})
	got := egresstest.Lines(string(res.Stdout))
	// The value reached the destination and came back as filler (the
	// placeholder repeated over the encoded form's length), not as the
	// value.
	body, loc, _ := strings.Cut(got["query"], "|")
	for _, echo := range []string{got["json"], body, loc} {
		if !strings.HasPrefix(echo, "Bearer "+b.Placeholder) {
			t.Errorf("echo %q, want the placeholder's filler", echo)
		}
	}
	for where, out := range map[string][]byte{"stdout": res.Stdout, "stderr": res.Stderr} {
		if bytes.Contains(out, []byte(escapedSecretValue)) {
			t.Errorf("the value is in the %s", where)
		}
	}
	if rec.count(func(e Event) bool { return e.Verdict == VerdictAllow && e.Secret == b.Name && e.Status == 200 }) != 2 {
		t.Errorf("want 2 injections, events %+v", rec.events)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
}
