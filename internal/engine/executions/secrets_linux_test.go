package executions

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/egress/tlsca"
	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// secretValue is the operator's credential in TestSecretsThroughTheEngine.
const secretValue = "ghp_EngineS3cretValue-98765-zyxw"

// pyUseSecret reads the placeholder from its environment, sends it to the
// secret's host with urllib and curl (trusting the egress CA through
// SSL_CERT_FILE and CURL_CA_BUNDLE, without being told a CA file) and to a
// host that reflects it, and prints what came back.
const pyUseSecret = `
import os, subprocess, urllib.request
token = os.environ["GITHUB_TOKEN"]
print("placeholder=" + token)
for path in ("/auth", "/reflect"):
    req = urllib.request.Request("https://allowed.test" + path, headers={"Authorization": "Bearer " + token})
    print(path[1:] + "=" + urllib.request.urlopen(req, timeout=10).read().decode())
curl = subprocess.run(["curl", "-sS", "-H", "Authorization: Bearer " + token, "https://allowed.test/auth"],
    capture_output=True, text=True, timeout=20)
print("curl=" + curl.stdout + curl.stderr.strip())
`

// TestSecretsThroughTheEngine: an execution asking for an operator secret
// gets a placeholder in its environment; its request to the secret's HTTPS
// host (a TEST-NET host in a network namespace of the test's own) arrives
// with the real value, a reflection comes back with the placeholder, and
// neither the stored record, the event stream nor anything the store
// keeps (records, events, audit) holds the value, its base64 or its hex.
// A key the secret is not for is refused with the words of an unknown name.
func TestSecretsThroughTheEngine(t *testing.T) {
	if ranIsolated(t) {
		return
	}
	e, _, dir := secretsEngine(t, admission.Config{})
	ctx := context.Background()

	req := py(pyUseSecret)
	req.Network, req.Secrets = true, []string{"GITHUB_TOKEN"}
	id, err := e.eng.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	events, err := follow(ctx, e.eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	for ev := range events {
		stream.WriteString(ev.Data)
	}
	x, err := getExec(ctx, e.eng, id)
	if err != nil {
		t.Fatal(err)
	}
	got := egresstest.Lines(x.Stdout)
	ph, want := placeholderRan(t, x, got)
	for _, k := range []string{"auth", "curl"} {
		if got[k] != want {
			t.Errorf("%s: the host received %q, want %q (the value)", k, got[k], want)
		}
	}
	if want := "Bearer " + ph + "|Bearer " + ph; got["reflect"] != want {
		t.Errorf("the reflection read %q, want %q", got["reflect"], want)
	}
	injected := func(ev run.NetworkEvent) bool {
		return ev.Proto == "http" && ev.Secret == "GITHUB_TOKEN" && ev.Verdict == egress.VerdictAllow && ev.Path == "/auth" && ev.Status == 200
	}
	if !slices.ContainsFunc(x.NetworkEvents, injected) {
		t.Errorf("no injection event in the record: %+v", x.NetworkEvents)
	}
	if !strings.Contains(stream.String(), `"secret":"GITHUB_TOKEN"`) {
		t.Errorf("no injection event in the stream: %s", stream.String())
	}

	// Nothing kept holds the value: the record as the engine returns it,
	// the stream, and every file of the store (records, events, audit).
	// The audit record is written after the record: wait for it.
	record, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	forms := []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue)),
		base64.RawURLEncoding.EncodeToString([]byte(secretValue)), hex.EncodeToString([]byte(secretValue))}
	for _, f := range forms {
		if bytes.Contains(record, []byte(f)) || strings.Contains(stream.String(), f) {
			t.Errorf("the value (as %q) is in the record or the stream", f)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		store := storeBytes(t, dir)
		if bytes.Contains(store, []byte(`"action":"end"`)) && bytes.Contains(store, []byte(id)) {
			for _, f := range forms {
				if bytes.Contains(store, []byte(f)) {
					t.Errorf("the value (as %q) is in the store's files", f)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no audit record of the execution in the store's files")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Another key: refused with the words of a name that does not exist.
	other := py(pyUseSecret)
	other.Caller, other.Network, other.Secrets = "someone-else", true, []string{"GITHUB_TOKEN"}
	_, errOther := e.eng.RunSync(ctx, other)
	other.Secrets = []string{"NO_SUCH_SECRET"}
	_, errUnknown := e.eng.RunSync(ctx, other)
	if !errors.Is(errOther, run.ErrInvalid) || !errors.Is(errUnknown, run.ErrInvalid) ||
		strings.ReplaceAll(errUnknown.Error(), "NO_SUCH_SECRET", "GITHUB_TOKEN") != errOther.Error() {
		t.Errorf("another key's secret: %v; an unknown one: %v", errOther, errUnknown)
	}
}

// placeholderRan checks that x, whose output lines are got, completed
// with a placeholder as long as the value, and returns the placeholder
// and what the test world's /auth answers to a request that carried the
// value ("Authorization: Bearer " + secretValue).
func placeholderRan(t *testing.T, x *run.Execution, got map[string]string) (ph, auth string) {
	t.Helper()
	ph = got["placeholder"]
	if x.Status != run.StatusCompleted || len(ph) != len(secretValue) {
		t.Fatalf("status %s stdout %q stderr %q", x.Status, x.Stdout, x.Stderr)
	}
	h := egresstest.Hash
	return ph, "1 " + h("Bearer "+secretValue) + " " + h("") + " " + h("")
}

// secretsEngine is an engine (with slots) whose executions reach the test
// world (allowed.test) through an egress that terminates TLS, with the
// operator secret GITHUB_TOKEN (secretValue, for allowed.test, for the
// key tester) in a catalog the test may replace as SIGHUP does; it
// returns the engine, that catalog and the store's directory.
func secretsEngine(t *testing.T, slots admission.Config) (*env, *egress.LiveCatalog, string) {
	t.Helper()
	w := egresstest.New(t)
	rc := secretsRun(t, w, "allowed.test")
	dir := t.TempDir()
	e := start(t, dir, nodeConfig{exec: Config{Run: rc}, slots: slots}, runtest.Jails(t))
	return e, rc.Secrets, dir
}

// secretsRun is the network configuration of an engine whose executions
// reach the hosts allow of the test world w through an egress that
// terminates TLS, with the operator secret GITHUB_TOKEN (secretValue, for
// allowed.test, for the key tester) in a live catalog.
func secretsRun(t *testing.T, w *egresstest.World, allow ...string) run.Config {
	t.Helper()
	rules, err := egress.ParseRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := egress.NewGuard([]uint16{uint16(w.API.Addr().(*net.TCPAddr).Port)})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tlsca.New()
	if err != nil {
		t.Fatal(err)
	}
	// The world's CA stands in for the public roots the egress verifies
	// destinations with, and for the host's bundle the jail trusts.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.CAPEM)
	netCfg := &egress.Config{Policy: egress.Policy{Allow: rules}, Guard: guard, Resolver: egress.StaticResolver(w.Hosts),
		Limits: egress.Limits{ConnectTimeout: 3 * time.Second}, Intercept: &egress.Interception{Issuer: ca, Roots: roots}}
	bundle := filepath.Join(t.TempDir(), "trust", "ca-bundle.pem")
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(append(slices.Clone(w.CAPEM), '\n'), ca.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := egress.ParseCatalog([]byte(`{"secrets": [{"name": "GITHUB_TOKEN", "value": "`+secretValue+`",
		"hosts": ["allowed.test"], "header": "Authorization: Bearer {value}", "keys": ["`+tester+`"]}]}`), egress.OSLookup)
	if err != nil {
		t.Fatal(err)
	}
	return run.Config{AllowNetwork: true, Network: netCfg, Secrets: egress.NewLiveCatalog(cat), TrustBundle: bundle}
}

// TestSyncQueuedSecretRemoved: a synchronous request that waits for a
// slot is checked against the operator's secrets again when it starts: a
// secret removed while it waited (SIGHUP) refuses it then, and the
// value never reaches the host.
func TestSyncQueuedSecretRemoved(t *testing.T) {
	if ranIsolated(t) {
		return
	}
	e, live, _ := secretsEngine(t, admission.Config{Concurrency: 1, QueueSize: 4})
	ctx := context.Background()
	if _, err := e.eng.Submit(ctx, py("import time; time.sleep(3)")); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker running", func() bool { return e.node.adm.Stats().Running == 1 })
	done := make(chan struct{})
	var x *run.Execution
	var runErr error
	go func() {
		defer close(done)
		req := py(pyUseSecret)
		req.Network, req.Secrets = true, []string{"GITHUB_TOKEN"}
		x, runErr = e.eng.RunSync(ctx, req)
	}()
	runtest.WaitFor(t, "the sync request waiting", func() bool { return e.node.adm.Stats().Queued == 1 })
	live.Store(&egress.Catalog{}) // the operator removed the secret (SIGHUP)
	<-done
	if runErr != nil {
		t.Fatalf("RunSync: %v", runErr)
	}
	if x.Status != run.StatusFailed || !strings.Contains(x.Error, "GITHUB_TOKEN") || x.Stdout != "" {
		t.Errorf("status %s error %q stdout %q, want failed naming the secret, never run", x.Status, x.Error, x.Stdout)
	}
}

// storeBytes is every file under dir (the embedded store's), joined.
func storeBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // a file removed as the store compacts
		}
		all = append(all, b...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}
