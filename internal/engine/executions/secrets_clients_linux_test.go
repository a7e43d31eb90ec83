package executions

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
)

// pyUseSecretLibraries sends the placeholder to the secret's host with
// requests and httpx, each left to find the egress CA as it does by
// itself (REQUESTS_CA_BUNDLE, SSL_CERT_FILE), and to the reflecting path;
// a library the jail's interpreter lacks is named and nothing is sent.
const pyUseSecretLibraries = `
import os
try:
    import requests, httpx
except ImportError as e:
    print("missing=" + e.name)
    raise SystemExit(0)
token = os.environ["GITHUB_TOKEN"]
print("placeholder=" + token)
h = {"Authorization": "Bearer " + token}
print("requests=" + requests.get("https://allowed.test/auth", headers=h, timeout=10).text)
print("requests_reflect=" + requests.get("https://allowed.test/reflect", headers=h, timeout=10).text)
with httpx.Client(timeout=10) as c:
    print("httpx=" + c.get("https://allowed.test/auth", headers=h).text)
    print("httpx_reflect=" + c.get("https://allowed.test/reflect", headers=h).text)
`

// TestSecretsThroughRequestsAndHTTPX: as TestSecretsThroughTheEngine does
// for urllib and curl, requests and httpx inside the jail reach the
// secret's host with the real value in place of the placeholder, read a
// reflection of it as the placeholder, and the value is nowhere in the
// output. It skips, saying so, when the jail's interpreter lacks either
// library (the Debian packages python3-requests and python3-httpx, which
// make test-setup installs).
func TestSecretsThroughRequestsAndHTTPX(t *testing.T) {
	if ranIsolated(t) {
		return
	}
	e, _, _ := secretsEngine(t, admission.Config{})
	req := py(pyUseSecretLibraries)
	req.Network, req.Secrets = true, []string{"GITHUB_TOKEN"}
	x, err := e.eng.RunSync(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := egresstest.Lines(x.Stdout)
	if m := got["missing"]; m != "" {
		t.Skipf("the jail's interpreter has no %s (Debian: python3-requests, python3-httpx)", m)
	}
	ph, want := placeholderRan(t, x, got)
	for _, lib := range []string{"requests", "httpx"} {
		if got[lib] != want {
			t.Errorf("%s: the host received %q, want %q (the value)", lib, got[lib], want)
		}
		if want := "Bearer " + ph + "|Bearer " + ph; got[lib+"_reflect"] != want {
			t.Errorf("%s: the reflection read %q, want %q", lib, got[lib+"_reflect"], want)
		}
	}
	if strings.Contains(x.Stdout+x.Stderr, secretValue) {
		t.Errorf("the value is in the output: %q %q", x.Stdout, x.Stderr)
	}
	injections := 0
	for _, ev := range x.NetworkEvents {
		if ev.Proto == "http" && ev.Secret == "GITHUB_TOKEN" && ev.Verdict == egress.VerdictAllow && ev.Path == "/auth" && ev.Status == 200 {
			injections++
		}
	}
	if injections != 2 || slices.ContainsFunc(x.NetworkEvents, func(ev run.NetworkEvent) bool { return ev.Verdict == egress.VerdictDeny }) {
		t.Errorf("want two injections to /auth and no refusal: %+v", x.NetworkEvents)
	}
}
