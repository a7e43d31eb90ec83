package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/runner/runnertest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/snapshot/snapshottest"
)

// These tests build real jails: run them under the shared lock.

func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	code := m.Run()
	if env != nil {
		if err := env.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the jails:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	envOnce sync.Once
	env     *snapshottest.Env
	envErr  error
)

func cgroupParent() string { return fmt.Sprintf("pyexec-snaptest-%d", os.Getpid()) }

// needEnv returns the fork server environment the tests share, or skips.
func needEnv(t *testing.T) *snapshottest.Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds real jails (CI runs as root)")
	}
	_, mount := runnertest.RichPython(t)
	envOnce.Do(func() { env, envErr = snapshottest.NewEnv(mount, cgroupParent()) })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func start(t *testing.T, e *snapshottest.Env) *snapshottest.Kernel {
	t.Helper()
	k, err := e.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func run(t *testing.T, k *snapshottest.Kernel, code string) {
	t.Helper()
	c, err := k.Run(context.Background(), code, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Report.Error != nil {
		t.Fatalf("%s: %s\n%s", c.Report.Error.Name, c.Report.Error.Value, c.Report.Error.Traceback)
	}
}

func value(t *testing.T, k *snapshottest.Kernel, expr string) string {
	t.Helper()
	v, err := k.Value(context.Background(), expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// A notebook's state: a DataFrame, numpy arrays, a fitted model (least
// squares: scikit-learn is not in the base environment), a function, a
// class and its instance, a closure, a file in the workspace; and what
// cannot be saved: a socket, a thread, a generator.
const notebook = `
import numpy as np, pandas as pd, socket, threading, hashlib
rng = np.random.default_rng(3)
n = 200_000
df = pd.DataFrame({"x": rng.normal(size=n), "g": rng.integers(0, 5, n), "name": [f"n{i % 97}" for i in range(n)]})
arr = rng.normal(size=(300, 300))
coef = np.linalg.lstsq(np.c_[df.x.values, np.ones(n)], df.g.values.astype(float), rcond=None)[0]
class Model:
    def __init__(self, coef):
        self.coef = coef
    def predict(self, x):
        return float(self.coef[0] * x + self.coef[1])
model = Model(coef)
def summarize(frame, col="x"):
    return round(float(frame[col].mean()), 9), len(frame)
def scaler(k):
    return lambda v: v * k
double = scaler(2)
with open("notes.txt", "w") as f:
    f.write("kept across the restore")
conn = socket.socket()
stop = threading.Event()
worker = threading.Thread(target=stop.wait, daemon=True)
worker.start()
pending = (i * i for i in range(10))
`

// fingerprint is compared between a saved kernel and its restore.
const fingerprint = `(int(pd.util.hash_pandas_object(df).sum()), df.dtypes.astype(str).tolist(),
 hashlib.sha256(arr.tobytes()).hexdigest(), arr.flags.writeable, model.predict(1.5), summarize(df), double(21),
 open("notes.txt").read(), type(model).__name__)`

// confinement is what a payload sees of its jail.
const confinement = `
def _confinement():
    import os
    st = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
            st[k] = v.split()
    def err(f):
        try:
            f()
            return "allowed"
        except Exception as e:
            return type(e).__name__
    return (st, err(lambda: open("/etc/shadow").read()), err(lambda: open("/usr/lib/pyexec-x", "w")),
            err(lambda: os.kill(1, 9)), err(lambda: os.setuid(0)),
            [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]],
            sorted(os.listdir("/")), os.getuid())
_confinement()`

func TestRestoreIntoAFreshJail(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	key, _ := snapshot.ParseKey(strings.Repeat("ab", 32))
	a := start(t, e)
	run(t, a, notebook)
	file, err := os.CreateTemp(t.TempDir(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Save(ctx, file, key, "alice", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	want := value(t, a, fingerprint)
	skipped := map[string]string{}
	for _, s := range h.Skipped {
		skipped[s.Name] = s.Reason
	}
	for name, why := range map[string]string{"conn": "socket", "worker": "thread", "pending": "generator", "stop": "lock"} {
		if !strings.Contains(skipped[name], why) {
			t.Errorf("%s: skipped for %q, want a reason naming %s", name, skipped[name], why)
		}
	}
	if !slices.Contains(h.Saved, "df") || slices.Contains(h.Saved, "conn") {
		t.Errorf("saved %v", h.Saved)
	}
	b, loaded, err := e.Restore(ctx, file, key, "alice", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !slices.Equal(loaded.Names, h.Saved) || len(loaded.Skipped) != 0 {
		t.Errorf("loaded %v, skipped %v; saved %v", loaded.Names, loaded.Skipped, h.Saved)
	}
	if got := value(t, b, fingerprint); got != want {
		t.Errorf("restored %s\nsaved    %s", got, want)
	}
	if got := value(t, b, "'conn' in globals(), 'pending' in globals()"); got != "(False, False)" {
		t.Errorf("skipped variables restored: %s", got)
	}
	// As strict as a new session's jail: the same view of its confinement,
	// and what a jail forbids is still forbidden.
	fresh := start(t, e)
	got, newJail := value(t, b, confinement), value(t, fresh, confinement)
	if got != newJail {
		t.Errorf("restored jail:\n%s\nnew jail:\n%s", got, newJail)
	}
	for _, must := range []string{"'Seccomp': ['2']", "'NoNewPrivs': ['1']", "'CapEff': ['0000000000000000']",
		"'Uid': ['65534', '65534', '65534', '65534']", "['lo']", "PermissionError', 'PermissionError'"} {
		if !strings.Contains(got, must) {
			t.Errorf("restored jail lacks %s: %s", must, got)
		}
	}
	if strings.Contains(got, "allowed") {
		t.Errorf("the restored jail allowed something a jail forbids: %s", got)
	}
}

func TestRefusedSnapshotsNeverReachPython(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	key, _ := snapshot.ParseKey(strings.Repeat("ab", 32))
	other, _ := snapshot.ParseKey(strings.Repeat("cd", 32))
	a := start(t, e)
	// Loading this state would leave a mark: a refused snapshot must not.
	run(t, a, "import os\nclass Mark:\n    def __reduce__(self):\n        return (os.makedirs, ('/work/loaded',))\nmark = Mark()")
	var raw bytes.Buffer
	if _, err := a.Save(ctx, &raw, key, "alice", 1<<30); err != nil {
		t.Fatal(err)
	}
	good := raw.Bytes()
	stateAt := bytes.Index(good, []byte("PYEXSTATE1"))
	tampered := bytes.Clone(good)
	tampered[stateAt+len(good[stateAt:])/2] ^= 0x20
	header := bytes.Clone(good)
	header[bytes.Index(good, []byte("alice"))] = 'A'
	cases := []struct {
		name  string
		raw   []byte
		key   snapshot.Key
		owner string
		limit int64
		want  error
	}{
		{"its state edited", tampered, key, "alice", 1 << 30, snapshot.ErrIntegrity},
		{"its header edited", header, key, "alice", 1 << 30, snapshot.ErrIntegrity},
		{"truncated", good[:len(good)-10], key, "alice", 1 << 30, snapshot.ErrIntegrity},
		{"restored by another key's owner", good, key, "bob", 1 << 30, snapshot.ErrIntegrity},
		{"verified by another server's key", good, other, "alice", 1 << 30, snapshot.ErrIntegrity},
		{"over the size cap", good, key, "alice", int64(len(good) - 1), snapshot.ErrTooLarge},
	}
	before := e.Pool.Stats().Sessions
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := writeTemp(t, c.raw)
			k, _, err := e.Restore(ctx, f, c.key, c.owner, c.limit)
			if k != nil || !errors.Is(err, c.want) {
				if k != nil {
					k.Close()
				}
				t.Fatalf("restored (%v, %v), want %v", k != nil, err, c.want)
			}
		})
	}
	// No kernel was started for any of them, so no byte reached Python.
	if after := e.Pool.Stats().Sessions; after != before {
		t.Errorf("kernels started for refused snapshots: %d before, %d after", before, after)
	}
	// The untouched snapshot does load, and leaves its mark in its own jail.
	k, _, err := e.Restore(ctx, writeTemp(t, good), key, "alice", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := value(t, k, "import os; os.path.isdir('/work/loaded')"); got != "True" {
		t.Errorf("the good snapshot did not load: %s", got)
	}
}

func writeTemp(t *testing.T, b []byte) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// hostile is a session that tries to escape through its own snapshot:
// code that runs when the snapshot is loaded, builtins and modules patched,
// files planted where Python looks for modules.
const hostile = `
import builtins, json, os
PROBE = '''
import os, socket, json
out = {}
def attempt(name, f):
    try:
        out[name] = "allowed: %r" % (f(),)
    except Exception as e:
        out[name] = type(e).__name__
attempt("read the host's shadow", lambda: open("/etc/shadow").read())
attempt("read the server's environment", lambda: open("/proc/1/environ").read())
attempt("kill the jail's init", lambda: os.kill(1, 9))
attempt("become root", lambda: os.setuid(0))
attempt("write the system", lambda: open("/usr/bin/pyexec-owned", "w"))
attempt("reach the network", lambda: socket.create_connection(("192.0.2.1", 80), timeout=1))
out["uid"] = os.getuid()
out["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
open("/tmp/pyexec-escaped-%s" % NONCE, "w").write("from the snapshot")
open("/work/escape.json", "w").write(json.dumps(out))
'''
class Payload:
    def __reduce__(self):
        return (exec, (PROBE.replace("NONCE", repr(NONCE)), {}))
payload = Payload()
builtins.print = lambda *a, **k: None
json.dumps = lambda *a, **k: "patched"
for name in ("sitecustomize.py", "_pickle.py", "pickle.py", "marshal.py"):
    with open(name, "w") as f:
        f.write("raise SystemExit('planted')\n")
`

func TestHostileSnapshotStaysInItsJail(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	key, _ := snapshot.ParseKey(strings.Repeat("ab", 32))
	nonce := fmt.Sprintf("%d", time.Now().UnixNano())
	a := start(t, e)
	run(t, a, "NONCE = "+nonce+"\n"+hostile)
	file, err := os.CreateTemp(t.TempDir(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Save(ctx, file, key, "mallory", 1<<30); err != nil {
		t.Fatal(err)
	}
	b, loaded, err := e.Restore(ctx, file, key, "mallory", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !slices.Contains(loaded.Names, "payload") {
		t.Fatalf("loaded %v", loaded)
	}
	// The payload's code ran as the snapshot loaded: inside the new jail,
	// as its user, where every escape failed.
	report := value(t, b, "open('/work/escape.json').read()")
	for _, want := range []string{`FileNotFoundError`, `"uid": 65534`, `"interfaces": ["lo"]`} {
		if !strings.Contains(report, want) {
			t.Errorf("escape report lacks %s: %s", want, report)
		}
	}
	if strings.Contains(report, "allowed") {
		t.Errorf("the snapshot's code did something a jail forbids: %s", report)
	}
	if _, err := os.Stat("/tmp/pyexec-escaped-" + nonce); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot's code wrote on the host: %v", err)
	}
	// Patches of builtins and modules are not state: the restored session
	// has the interpreter's own; the planted files did not stop the load.
	if got := value(t, b, "import builtins, json; builtins.print.__module__, json.dumps({'a': 1})"); got != `('builtins', '{"a": 1}')` {
		t.Errorf("patches carried over: %s", got)
	}
	if got := value(t, b, "sorted(f for f in __import__('os').listdir('/work') if f.endswith('.py'))"); !strings.Contains(got, "_pickle.py") {
		t.Errorf("the planted files were not restored as files: %s", got)
	}
}

// TestForkDiverges: a fork's state (an array and a DataFrame of many
// pipe-fulls, which go from the parent's channel into the child's request
// pipe by splice) arrives whole, and then parent and child change apart.
func TestForkDiverges(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	a := start(t, e)
	run(t, a, "import numpy as np, pandas as pd\nx = [1]\nbig = np.arange(10**6)\n"+
		"df = pd.DataFrame(np.random.default_rng(7).normal(size=(300000, 10)), columns=list('abcdefghij'))\n"+
		"with open('f.txt', 'w') as f:\n    f.write('parent')")
	sums := "float(df.values.sum()), df.shape, list(df.columns[:2])"
	want := value(t, a, sums)
	b, loaded, err := e.Fork(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !slices.Contains(loaded.Names, "big") || !slices.Contains(loaded.Names, "df") {
		t.Fatalf("loaded %v", loaded)
	}
	if got := value(t, b, sums); got != want {
		t.Fatalf("the fork's DataFrame: %s, want %s", got, want)
	}
	run(t, b, "x.append(2)\nbig[0] = -1\nopen('f.txt', 'w').write('child')")
	run(t, a, "x.append(3)\ndf.iloc[0, 0] = 1e9")
	if got := value(t, a, "x, int(big[0]), open('f.txt').read(), float(df.iloc[0, 0])"); got != "([1, 3], 0, 'parent', 1000000000.0)" {
		t.Errorf("parent: %s", got)
	}
	if got := value(t, b, "x, int(big[0]), int(big.sum()), open('f.txt').read()"); got != "([1, 2], -1, 499999499999, 'child')" {
		t.Errorf("child: %s", got)
	}
	if got := value(t, b, sums); got != want {
		t.Errorf("the fork's DataFrame after the parent's change: %s, want %s", got, want)
	}
}
