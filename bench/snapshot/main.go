// Command snapshot measures a session's snapshot, restore, fork and first
// call after hibernation, in real jails forked from a fork server as the
// engine forks them, for a state of -mb MiB: a pandas DataFrame, numpy
// arrays, a fitted model (scikit-learn's when the environment has it, else
// a least-squares fit), a function, a class, a closure and a workspace
// file. It prints a markdown table. Root only; a measurement, not a test.
//
//	go test -count=1 -run TestRestoreIntoAFreshJail ./internal/snapshot   # builds the test environment once
//	go run ./bench/snapshot -n 5 -mb 100
//	go run ./bench/snapshot -env /path/to/venv    # a virtual environment with numpy and pandas (and scikit-learn)
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/snapshot/snapshottest"
)

func main() {
	if sandbox.IsInit() {
		os.Exit(sandbox.Init())
	}
	os.Exit(run())
}

func run() int {
	envDir := flag.String("env", "", "virtual environment with numpy and pandas (default: the tests' under the user's cache)")
	n := flag.Int("n", 5, "repetitions")
	mb := flag.Int("mb", 100, "MiB of DataFrame in the state")
	pickles := flag.Bool("pickles", false, "also time, inside the kernel, pickle in-band and cloudpickle (which -env must have) on the same state")
	parts := flag.Bool("parts", false, "also time a fork's two halves apart: the parent's save into the server's memory, and a new kernel's load from it")
	flag.Parse()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench/snapshot:", err)
		return 1
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("builds jails: run it as root"))
	}
	dir := *envDir
	if dir == "" {
		var err error
		if dir, err = testEnv(); err != nil {
			return fail(err)
		}
	}
	parent := fmt.Sprintf("pyexec-snapbench-%d", os.Getpid())
	e, err := snapshottest.NewEnv(dir, parent)
	if err != nil {
		return fail(err)
	}
	defer e.Close()
	rows, err := measure(e, *n, *mb, *pickles, *parts)
	if err != nil {
		return fail(err)
	}
	fmt.Print(rows)
	return 0
}

// testEnv finds the environment runnertest builds for the tests.
func testEnv() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	m, _ := filepath.Glob(filepath.Join(cache, "pyexec-test", "rich-*", "bin", "python3"))
	if len(m) == 0 {
		return "", errors.New("no test environment: run the snapshot tests once, or give -env")
	}
	return filepath.Dir(filepath.Dir(m[0])), nil
}

// stateCell builds the state: mb MiB of DataFrame (ten float64 columns).
func stateCell(mb int) string {
	return fmt.Sprintf(`
import numpy as np, pandas as pd
rng = np.random.default_rng(1)
df = pd.DataFrame(rng.normal(size=(%d, 10)), columns=[f"c{i}" for i in range(10)])
arr = rng.normal(size=(1000, 1000))
X = rng.normal(size=(5000, 20)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
try:
    from sklearn.linear_model import LogisticRegression
    model = LogisticRegression().fit(X, y)
except ImportError:
    model = np.linalg.lstsq(X, y.astype(float), rcond=None)[0]
def scale(v, k=2.0):
    return v * k
class Stats:
    def __init__(self, frame):
        self.mean = frame.mean()
    def shifted(self, by):
        return self.mean + by
stats = Stats(df)
def make_adder(n):
    return lambda x: x + n
add3 = make_adder(3)
open("notes.txt", "w").write("kept")
kind = type(model).__name__
`, mb<<20/80)
}

// compare times pickle's protocols and cloudpickle on the state's data.
const compare = `import time, pickle, cloudpickle
ns = {k: v for k, v in globals().items() if not k.startswith("__") and k not in ("np", "pd", "LogisticRegression")}
def best(f):
    t = []
    for _ in range(3):
        t0 = time.perf_counter(); r = f(); t.append(time.perf_counter() - t0)
    return round(min(t), 4), r
bufs = []
out = {}
data = {"df": df, "arr": arr, "model": model}  # pickle cannot save the closure by reference
out["pickle 4 dumps"], p4 = best(lambda: pickle.dumps(data, protocol=4))
out["pickle 4 loads"], _ = best(lambda: pickle.loads(p4))
out["pickle 5 out-of-band dumps"], p5 = best(lambda: (bufs.clear(), pickle.dumps(data, protocol=5, buffer_callback=bufs.append))[1])
out["its in-band bytes"] = len(p5)
out["cloudpickle dumps"], c = best(lambda: cloudpickle.dumps(ns, protocol=5))
out["cloudpickle loads"], _ = best(lambda: cloudpickle.loads(c))
out["cloudpickle out-of-band dumps"], _ = best(lambda: (bufs.clear(), cloudpickle.dumps(ns, protocol=5, buffer_callback=bufs.append))[1])
out`

const probe = "float(df.values.sum()), float(arr.sum()), scale(2), float(stats.shifted(1)['c0']), add3(1), open('notes.txt').read()"

func measure(e *snapshottest.Env, n, mb int, pickles, parts bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	keyDir, err := os.MkdirTemp("", "pyexec-snapbench-key-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(keyDir)
	key, err := snapshot.LoadKey(keyDir)
	if err != nil {
		return "", err
	}
	a, err := e.Start(ctx)
	if err != nil {
		return "", err
	}
	defer a.Close()
	if c, err := a.Run(ctx, stateCell(mb), false); err != nil || c.Report.Error != nil {
		return "", fmt.Errorf("building the state: %v %+v", err, c)
	}
	want, err := a.Value(ctx, probe)
	if err != nil {
		return "", err
	}
	kind, _ := a.Value(ctx, "kind")
	times := map[string][]time.Duration{}
	var stateBytes, fileBytes int64
	for range n {
		f, err := os.CreateTemp("", "pyexec-snapbench-*")
		if err != nil {
			return "", err
		}
		t0 := time.Now()
		h, err := a.Save(ctx, f, key, "bench", 1<<31)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return "", err
		}
		times["snapshot"] = append(times["snapshot"], time.Since(t0))
		st, _ := f.Stat()
		stateBytes, fileBytes = h.StateBytes, st.Size()

		t0 = time.Now()
		b, _, err := e.Restore(ctx, f, key, "bench", 1<<31)
		if err != nil {
			return "", err
		}
		times["restore"] = append(times["restore"], time.Since(t0))
		if got, err := b.Value(ctx, probe); err != nil || got != want {
			return "", fmt.Errorf("restored state differs: %s, %v (want %s)", got, err, want)
		}
		b.Close()

		// Hibernated: the kernel is gone, its snapshot on disk; the next
		// call restores it, then runs.
		t0 = time.Now()
		b, _, err = e.Restore(ctx, f, key, "bench", 1<<31)
		if err != nil {
			return "", err
		}
		if _, err := b.Value(ctx, "df.shape"); err != nil {
			return "", err
		}
		times["first call after hibernation"] = append(times["first call after hibernation"], time.Since(t0))
		b.Close()
		f.Close()
		os.Remove(f.Name())

		t0 = time.Now()
		k, err := e.Start(ctx)
		if err != nil {
			return "", err
		}
		times["a new kernel (part of the rows above)"] = append(times["a new kernel (part of the rows above)"], time.Since(t0))
		k.Close()

		t0 = time.Now()
		c, _, err := e.Fork(ctx, a)
		if err != nil {
			return "", err
		}
		times["fork (same node)"] = append(times["fork (same node)"], time.Since(t0))
		if got, err := c.Value(ctx, probe); err != nil || got != want {
			return "", fmt.Errorf("forked state differs: %s, %v", got, err)
		}
		c.Close()
		if parts {
			if err := timeHalves(ctx, e, a, times); err != nil {
				return "", err
			}
		}
	}
	var out strings.Builder
	if pickles {
		v, err := a.Value(ctx, compare)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "In the kernel, best of 3 (seconds; bytes): %s\n\n", v)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&out, "State: %d MiB DataFrame + arrays + %s model + function, class, closure, workspace file; "+
		"state %.1f MiB, snapshot file %.1f MiB; %d runs; load average %s\n\n",
		mb, kind, float64(stateBytes)/(1<<20), float64(fileBytes)/(1<<20), n, strings.Join(strings.Fields(string(load))[:3], " "))
	out.WriteString("| | p50 | min | max | target |\n|---|---|---|---|---|\n")
	for _, r := range []struct{ name, target string }{{"snapshot", "≤ 2 s"}, {"restore", "≤ 2 s"},
		{"first call after hibernation", "≤ 1 s"}, {"fork (same node)", "≤ 200 ms"},
		{"a new kernel (part of the rows above)", ""}, {"fork's save into the server's memory", ""},
		{"fork's load from the server's memory", ""}} {
		d := times[r.name]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Fprintf(&out, "| %s | %s | %s | %s | %s |\n", r.name, ms(d[len(d)/2]), ms(d[0]), ms(d[len(d)-1]), r.target)
	}
	return out.String(), nil
}

// timeHalves times a fork's halves apart: a's save into a buffer, then a
// new kernel's load of that buffer.
func timeHalves(ctx context.Context, e *snapshottest.Env, a *snapshottest.Kernel, times map[string][]time.Duration) error {
	var buf bytes.Buffer
	t0 := time.Now()
	if err := a.SaveState(ctx, func(m runner.StateMeta) (io.Writer, error) {
		buf.Grow(int(m.Bytes))
		return &buf, nil
	}); err != nil {
		return err
	}
	times["fork's save into the server's memory"] = append(times["fork's save into the server's memory"], time.Since(t0))
	k, err := e.Start(ctx)
	if err != nil {
		return err
	}
	defer k.Close()
	t0 = time.Now()
	if _, err := k.Load(ctx, int64(buf.Len()), &buf); err != nil {
		return err
	}
	times["fork's load from the server's memory"] = append(times["fork's load from the server's memory"], time.Since(t0))
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
