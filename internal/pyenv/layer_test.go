package pyenv

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/pyenv/pyenvtest"
)

// layerWheels are testWheels plus an older tinydep, which the base's
// tinyreq does not choose.
func layerWheels() []pyenvtest.Wheel {
	return append(testWheels(), pyenvtest.Wheel{Name: "tinydep", Version: "1.1", Files: map[string]string{"tinydep.py": "VALUE = 11\n"}})
}

func TestEnvironmentLayerOverBase(t *testing.T) {
	run := jail(t)
	ix := pyenvtest.NewIndex(t, layerWheels()...)
	m := newTestEnvs(t, ix, func(c *EnvConfig) { c.Base = []string{"tinyreq"} })
	in := python(t, "")
	ctx := context.Background()
	base, err := m.PrepareBase(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}

	var lines []string
	l, err := m.Acquire(ctx, in, set(t, "tinyreq", "other"), func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	if l.Env.BaseKey != base.Key || !slices.Equal(l.Dirs(), []string{l.Env.Dir, base.Dir}) {
		t.Fatalf("base key %q, dirs %v: want a layer over %s", l.Env.BaseKey, l.Dirs(), base.Key)
	}
	// Of the store, only the base environment is the operator's choice
	// (what may have a fork server): not a layer over it, nor the store
	// itself; what lies outside the store (interpreters) is the operator's.
	store := filepath.Dir(base.Dir)
	if !m.OperatorChosen(base.Dir) || m.OperatorChosen(l.Env.Dir) || m.OperatorChosen(store) ||
		m.OperatorChosen(filepath.Join(store, "..", "envs", filepath.Base(l.Env.Dir))) || !m.OperatorChosen(t.TempDir()) {
		t.Errorf("OperatorChosen: base %v, layer %v, the store %v, elsewhere %v; want the base and elsewhere",
			m.OperatorChosen(base.Dir), m.OperatorChosen(l.Env.Dir), m.OperatorChosen(store), m.OperatorChosen(t.TempDir()))
	}
	own, err := installedDists(l.Env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || own["other"] != "0.1" {
		t.Errorf("the layer's own distributions are %v, want only other 0.1", own)
	}
	if want := []string{"other", "tinydep", "tinyreq"}; !slices.Equal(l.Env.Installed, want) {
		t.Errorf("installed %v, want %v (the base's and the layer's)", l.Env.Installed, want)
	}
	if l.Env.SizeBytes >= base.SizeBytes {
		t.Errorf("layer %d bytes, base %d: the layer should hold far less than a whole environment", l.Env.SizeBytes, base.SizeBytes)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "over the base environment") {
		t.Errorf("progress %q does not say the install goes over the base", lines)
	}
	got := runIn(t, run, in, l, "import sys, tinyreq, other\nprint(tinyreq.VALUE, other.X, sys.prefix == sys.base_prefix)")
	if got != "42 1 False\n" {
		t.Errorf("in the jail: %q", got)
	}
	l.Release()

	l2, err := m.Acquire(ctx, in, set(t, "other", "tinyreq"), func(s string) { t.Errorf("progress on reuse: %s", s) })
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
	if l2.Env.Key != l.Env.Key || m.Stats().Builds != 2 {
		t.Errorf("second request: key %s (first %s), builds %d: want the layer reused", l2.Env.Key, l.Env.Key, m.Stats().Builds)
	}

	t.Run("a conflict with the base's versions gets a whole environment", func(t *testing.T) {
		var lines []string
		l, err := m.Acquire(ctx, in, set(t, "tinydep==1.1"), func(s string) { lines = append(lines, s) })
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if l.Env.BaseKey != "" || len(l.Dirs()) != 1 {
			t.Errorf("base key %q, dirs %v: want a whole environment", l.Env.BaseKey, l.Dirs())
		}
		if got := runIn(t, run, in, l, "import tinydep; print(tinydep.VALUE)"); got != "11\n" {
			t.Errorf("got %q", got)
		}
		if !strings.Contains(strings.Join(lines, "\n"), "building a separate environment") {
			t.Errorf("progress %q does not say why", lines)
		}
	})

	t.Run("the set's own failure is the resolver's message, without a hint about source builds", func(t *testing.T) {
		builds := m.Stats().Builds
		_, err := m.Acquire(ctx, in, set(t, "tinyreq", "no-such-dist"), nil)
		var ie *InstallError
		if !errors.As(err, &ie) || !strings.Contains(ie.Output, "no-such-dist") {
			t.Fatalf("error %v, want an InstallError naming no-such-dist", err)
		}
		if strings.Contains(err.Error(), "source builds") {
			t.Errorf("error %q mentions source builds for a distribution that does not exist", err)
		}
		if m.Stats().Builds != builds {
			t.Errorf("a failed resolution built %d environments", m.Stats().Builds-builds)
		}
	})

	t.Run("a layer in use keeps its base; pruning takes both", func(t *testing.T) {
		l, err := m.Acquire(ctx, in, set(t, "other"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Prune(ctx, PruneOptions{All: true}); err != nil {
			t.Fatal(err)
		}
		envs, err := m.List()
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range envs {
			keys = append(keys, e.Key)
		}
		if !slices.Contains(keys, base.Key) || !slices.Contains(keys, l.Env.Key) {
			t.Errorf("left %v: the layer in use and its base must stay", keys)
		}
		l.Release()
		if _, err := m.Prune(ctx, PruneOptions{All: true}); err != nil {
			t.Fatal(err)
		}
		if envs, _ := m.List(); len(envs) != 0 {
			t.Errorf("%d environments left after pruning everything unused", len(envs))
		}
	})
}

func TestEnvironmentSkipsMissingDetectedImports(t *testing.T) {
	run := jail(t)
	ix := pyenvtest.NewIndex(t, testWheels()...)
	m := newTestEnvs(t, ix, nil)
	in := python(t, "")
	ctx := context.Background()
	detected := func(names ...string) Set {
		var reqs []Requirement
		for _, n := range names {
			r, err := ParseRequirement(n, FromDetection)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
		return Merge(reqs)
	}
	var lines []string
	l, err := m.Acquire(ctx, in, detected("other", "no-such-module"), func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatalf("a detected import no index has failed the environment: %v", err)
	}
	if !slices.Equal(l.Skipped, []string{"no-such-module"}) {
		t.Errorf("skipped %v, want [no-such-module]", l.Skipped)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "skipping no-such-module") {
		t.Errorf("progress %q does not say what was skipped", lines)
	}
	got := runIn(t, run, in, l, "import other\ntry:\n import no_such_module\nexcept ModuleNotFoundError as e:\n print(other.X, e.name)")
	if got != "1 no_such_module\n" {
		t.Errorf("in the jail: %q", got)
	}
	l.Release()

	pages := ix.Pages("no-such-module")
	l, err = m.Acquire(ctx, in, detected("other", "no-such-module"), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if ix.Pages("no-such-module") != pages || !slices.Equal(l.Skipped, []string{"no-such-module"}) {
		t.Errorf("the index was asked again (%d → %d) or nothing skipped (%v)", pages, ix.Pages("no-such-module"), l.Skipped)
	}

	t.Run("only a missing import leaves the bare interpreter", func(t *testing.T) {
		l, err := m.Acquire(ctx, in, detected("no-such-module"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		if l.Python() != in.Path || len(l.Dirs()) != 0 {
			t.Errorf("python %s dirs %v, want the bare interpreter %s", l.Python(), l.Dirs(), in.Path)
		}
	})

	t.Run("an explicit requirement still fails", func(t *testing.T) {
		_, err := m.Acquire(ctx, in, set(t, "other", "no-such-module"), nil)
		if !errors.Is(err, ErrInstall) || !strings.Contains(err.Error(), "no-such-module") {
			t.Errorf("error %v, want an install error naming no-such-module", err)
		}
	})
}

func TestEnvironmentWaitsForTheBaseBeingBuilt(t *testing.T) {
	ix := pyenvtest.NewIndex(t, layerWheels()...)
	m := newTestEnvs(t, ix, func(c *EnvConfig) { c.Base = []string{"tinyreq"} })
	in := python(t, "")
	ctx := context.Background()
	baseKey := m.Key(in, m.base)
	hold, err := lockWait(ctx, filepath.Join(lockDir(m.cfg), baseKey+".build"), true) // the base build waits on this
	if err != nil {
		t.Fatal(err)
	}
	prepared := make(chan error, 1)
	go func() {
		_, err := m.PrepareBase(ctx, in, nil)
		prepared <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		_, building := m.flights[baseKey]
		m.mu.Unlock()
		if building {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the base build never started")
		}
	}
	acquired := make(chan *Lease, 1)
	go func() {
		l, err := m.Acquire(ctx, in, set(t, "tinyreq", "other"), nil)
		if err != nil {
			t.Error(err)
		}
		acquired <- l
	}()
	time.Sleep(100 * time.Millisecond) // the request is waiting for the base, not building
	hold.unlock()
	if err := <-prepared; err != nil {
		t.Fatal(err)
	}
	l := <-acquired
	if l == nil {
		return
	}
	defer l.Release()
	if l.Env.BaseKey != baseKey || m.Stats().Builds != 2 {
		t.Errorf("base key %q, builds %d: want a layer over the base built meanwhile, not a whole environment", l.Env.BaseKey, m.Stats().Builds)
	}
}
