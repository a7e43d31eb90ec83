package pyenv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/pyenv/detect"
	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
	"github.com/pyexec/pyexec/internal/sandbox"
)

// testWheels are the distributions of the loopback index.
func testWheels() []pyenvtest.Wheel {
	return []pyenvtest.Wheel{
		{Name: "PyYAML", Version: "6.0.99", Files: map[string]string{"yaml/__init__.py": "VERSION = 'fake-6.0.99'\ndef safe_load(s):\n    return {'loaded': s}\n"}},
		{Name: "tinyreq", Version: "1.0", Files: map[string]string{"tinyreq.py": "from tinydep import VALUE\nNAME = 'tinyreq'\n"}, Requires: []string{"tinydep>=1"}},
		{Name: "tinydep", Version: "1.2", Files: map[string]string{"tinydep.py": "VALUE = 42\n"}},
		{Name: "other", Version: "0.1", Files: map[string]string{"other.py": "X = 1\n"}},
	}
}

func newTestEnvs(t *testing.T, ix *pyenvtest.Index, mod func(*EnvConfig)) *Environments {
	t.Helper()
	uv, _ := pyenvtest.Tools(t)
	cfg := EnvConfig{Dir: pyenvtest.EnvDir(t), IndexURL: ix.URL, UV: uv, Base: []string{}}
	if mod != nil {
		mod(&cfg)
	}
	m, err := NewEnvironments(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func set(t *testing.T, lines ...string) Set {
	t.Helper()
	var reqs []Requirement
	for _, l := range lines {
		opt := strings.HasPrefix(l, "?")
		r, err := ParseRequirement(strings.TrimPrefix(l, "?"), FromRequest)
		if err != nil {
			t.Fatal(err)
		}
		r.Optional = opt
		reqs = append(reqs, r)
	}
	return Merge(reqs)
}

// runIn runs code with the lease's interpreter in a real jail.
func runIn(t *testing.T, run *sandbox.Manager, in Interpreter, l *Lease, code string) string {
	t.Helper()
	var mounts []sandbox.Mount
	for _, d := range l.Dirs() {
		mounts = append(mounts, sandbox.Mount{Source: d})
	}
	for _, m := range in.Mounts {
		mounts = append(mounts, sandbox.Mount{Source: m})
	}
	res, err := run.Run(context.Background(), sandbox.Spec{Argv: []string{l.Python(), "-c", code}, Mounts: mounts}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != sandbox.StatusOK {
		t.Fatalf("run ended %s (%s): %s", res.Status, res.Reason, res.Stderr)
	}
	return string(res.Stdout)
}

func TestEnvironmentBuildAndReuse(t *testing.T) {
	run := jail(t)
	ix := pyenvtest.NewIndex(t, testWheels()...)
	for _, tc := range []struct {
		name string
		noUV bool
	}{{"uv", false}, {"venv and pip fallback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestEnvs(t, ix, func(c *EnvConfig) { c.NoUV = tc.noUV })
			in := python(t, "3.12")
			var lines []string
			l, err := m.Acquire(context.Background(), in, set(t, "pyyaml", "TinyReq>=1.0"), func(s string) { lines = append(lines, s) })
			if err != nil {
				t.Fatal(err)
			}
			if got := runIn(t, run, in, l, "import yaml, tinyreq; print(yaml.VERSION, tinyreq.VALUE)"); got != "fake-6.0.99 42\n" {
				t.Errorf("in the jail: %q", got)
			}
			l.Release()
			if len(lines) == 0 || !strings.Contains(strings.Join(lines, "\n"), "environment ready") {
				t.Errorf("progress lines %q lack the end of the install", lines)
			}
			if st := m.Stats(); st.Builds != 1 || st.Hits != 0 {
				t.Errorf("after the first run: %+v, want one build", st)
			}
			l2, err := m.Acquire(context.Background(), in, set(t, "tinyreq>=1.0", "PyYAML"), func(s string) { t.Errorf("progress on reuse: %s", s) })
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Release()
			if st := m.Stats(); st.Builds != 1 || st.Hits != 1 || l2.Env.Key != l.Env.Key {
				t.Errorf("second run: %+v key %s vs %s, want a reuse without the installer", st, l2.Env.Key, l.Env.Key)
			}
			installed := slices.DeleteFunc(slices.Clone(l2.Env.Installed), func(n string) bool { return n == "pip" }) // pip's venv has pip
			if want := []string{"pyyaml", "tinydep", "tinyreq"}; !slices.Equal(installed, want) {
				t.Errorf("installed %v, want %v", l2.Env.Installed, want)
			}
		})
	}
}

func TestEnvironmentConcurrentBuildOnce(t *testing.T) {
	ix := pyenvtest.NewIndex(t, testWheels()...)
	m := newTestEnvs(t, ix, nil)
	in := python(t, "")
	const n = 8
	var wg sync.WaitGroup
	keys := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(context.Background(), in, set(t, "other"), nil)
			if err == nil {
				keys[i] = l.Env.Key
				l.Release()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || keys[i] != keys[0] {
			t.Errorf("request %d: key %s err %v", i, keys[i], errs[i])
		}
	}
	if st := m.Stats(); st.Builds != 1 {
		t.Errorf("%d builds for %d concurrent requests of one new set, want 1", st.Builds, n)
	}
	if got := ix.Pages("other"); got != 1 {
		t.Errorf("the index was asked for the project %d times, want once", got)
	}
}

func TestEnvironmentFailures(t *testing.T) {
	run := jail(t)
	ix := pyenvtest.NewIndex(t, testWheels()...)
	m := newTestEnvs(t, ix, nil)
	in := python(t, "")
	t.Run("missing distribution is an install error", func(t *testing.T) {
		_, err := m.Acquire(context.Background(), in, set(t, "pyyaml", "no-such-dist"), nil)
		var ie *InstallError
		if !errors.Is(err, ErrInstall) || !errors.As(err, &ie) || !strings.Contains(ie.Output, "no-such-dist") {
			t.Fatalf("error %v, want an InstallError naming no-such-dist", err)
		}
	})
	t.Run("missing optional distribution is skipped", func(t *testing.T) {
		l, err := m.Acquire(context.Background(), in, set(t, "pyyaml", "?ujson"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if len(l.Env.NotInstalled) != 1 || l.Env.NotInstalled[0] != "ujson" {
			t.Errorf("not installed %v, want [ujson]", l.Env.NotInstalled)
		}
		if got := runIn(t, run, in, l, "import yaml\ntry:\n import ujson\nexcept ImportError:\n print('fallback')"); got != "fallback\n" {
			t.Errorf("got %q", got)
		}
	})
}

func TestEnvironmentEvictionAndBase(t *testing.T) {
	ix := pyenvtest.NewIndex(t, testWheels()...)
	m := newTestEnvs(t, ix, func(c *EnvConfig) { c.Base = []string{"tinyreq"}; c.MaxBytes = 1 })
	in := python(t, "")
	ctx := context.Background()
	base, err := m.PrepareBase(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("base covers its transitive distributions", func(t *testing.T) {
		l, err := m.Acquire(ctx, in, set(t, "tinydep"), nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		if l.Env.Key != base.Key {
			t.Errorf("tinydep ran in %s, want the base environment %s", l.Env.Key, base.Key)
		}
		l, err = m.Acquire(ctx, in, set(t, "tinydep>=1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		if l.Env.Key == base.Key {
			t.Errorf("a constrained requirement used the base environment")
		}
	})
	t.Run("in use and base are never evicted", func(t *testing.T) {
		held, err := m.Acquire(ctx, in, set(t, "pyyaml"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		other, err := m.Acquire(ctx, in, set(t, "other"), nil) // over the 1-byte cap: evicts what it can
		if err != nil {
			t.Fatal(err)
		}
		other.Release()
		envs, err := m.List()
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range envs {
			keys = append(keys, e.Key)
		}
		for _, want := range []string{held.Env.Key, base.Key, other.Env.Key} {
			if !strings.Contains(strings.Join(keys, " "), want) {
				t.Errorf("environment %s was evicted; left: %v", want, keys)
			}
		}
		if len(envs) != 3 || m.Stats().Evictions < 1 {
			t.Errorf("environments %v, evictions %d: want the unused tinydep>=1 one evicted", keys, m.Stats().Evictions)
		}
		// pyyaml and other are layers over the base: the one in use keeps
		// its base alive.
		if held.Env.BaseKey != base.Key || other.Env.BaseKey != base.Key {
			t.Errorf("base keys %q and %q, want both layers over %s", held.Env.BaseKey, other.Env.BaseKey, base.Key)
		}
		removed, err := m.Prune(ctx, PruneOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 1 || removed[0].Key != other.Env.Key {
			t.Errorf("prune --all removed %v, want only the unused layer (the base of one in use stays)", removed)
		}
		held.Release()
		removed, err = m.Prune(ctx, PruneOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(removed) != 2 {
			t.Errorf("prune --all removed %d once nothing was in use, want the layer and its base", len(removed))
		}
	})
}

// TestEmptySetRunsInTheBase: the base environment is every execution's
// default — an empty requirement set gets it once it is built, and the
// bare interpreter until then.
func TestEmptySetRunsInTheBase(t *testing.T) {
	ix := pyenvtest.NewIndex(t, testWheels()...)
	m := newTestEnvs(t, ix, func(c *EnvConfig) { c.Base = []string{"tinyreq"} })
	in := python(t, "")
	ctx := context.Background()
	l, err := m.Acquire(ctx, in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if l.Python() != in.Path || l.Dirs() != nil {
		t.Errorf("before the base is built: python %s, dirs %v; want the bare interpreter", l.Python(), l.Dirs())
	}
	base, err := m.PrepareBase(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err = m.Acquire(ctx, in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if l.Env.Key != base.Key || !slices.Equal(l.Dirs(), []string{base.Dir}) {
		t.Errorf("an empty set got %s (dirs %v), want the base environment %s", l.Env.Key, l.Dirs(), base.Key)
	}
}

func TestEnvironmentRealIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("installs numpy and requests from PyPI")
	}
	if !pyenvtest.PyPIReachable() {
		t.Skip("PyPI (https://pypi.org/simple) is unreachable")
	}
	run := jail(t)
	uv, _ := pyenvTools(t)
	m, err := NewEnvironments(EnvConfig{Dir: pyenvtest.PyPIEnvDir(t), UV: uv, Base: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := python(t, "")
	an, err := NewAnalyzer(run, AnalyzerConfig{}).Analyze(context.Background(), in,
		[]detect.File{{Path: "main.py", Data: []byte("import requests, numpy\n")}}, "main.py", false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(context.Background(), in, Merge(DefaultImportMap().Requirements(an.Imports)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if got := runIn(t, run, in, l, "import requests, numpy; print(numpy.arange(3).sum(), requests.__name__)"); got != "3 requests\n" {
		t.Errorf("got %q", got)
	}
}
