package executions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// detectingEnvs plays the resolver of one process: it "runs the detector"
// (counted) for a project it has no analysis of, and remembers analyses
// it made or was given. It installs nothing.
type detectingEnvs struct {
	mu                   sync.Mutex
	known                map[string]*pyenv.Analysis
	detections, remember int
}

func projectKey(files []run.File) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Path + "\x00" + string(f.Data) + "\x00")
	}
	return b.String()
}

func (d *detectingEnvs) Resolve(_ context.Context, _ run.Interpreter, files []run.File, _, _ string) (pyenv.Needs, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	an, ok := d.known[projectKey(files)]
	if !ok {
		d.detections++
		an = &pyenv.Analysis{AllImports: []pyenv.Import{{Module: "json", File: "main.py", Line: 1}}}
		d.known[projectKey(files)] = an
	}
	return pyenv.Needs{Analysis: an}, nil
}

func (d *detectingEnvs) Remember(_ run.Interpreter, files []run.File, _ string, an *pyenv.Analysis) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.remember++
	d.known[projectKey(files)] = an
}

// Acquire gives an empty set the interpreter itself (the base
// environment of a server without one); it installs nothing.
func (d *detectingEnvs) Acquire(_ context.Context, in run.Interpreter, set pyenv.Set, _ func(string)) (run.EnvLease, error) {
	if len(set) > 0 {
		return nil, errors.New("nothing is installed in this test")
	}
	return hostLease(in.Path), nil
}

// hostLease is the host's interpreter as an environment.
type hostLease string

func (l hostLease) Python() string    { return string(l) }
func (l hostLease) Dirs() []string    { return nil }
func (l hostLease) Skipped() []string { return nil }
func (l hostLease) Release()          {}

func (d *detectingEnvs) Base() pyenv.Set { return nil }

func (d *detectingEnvs) counts() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detections, d.remember
}

// TestQueuedJobCarriesItsAnalysis: a job queued before a crash runs after
// the restart on the analysis made when it was submitted; the restarted
// process, whose memory of analyses is empty, does not detect again.
func TestQueuedJobCarriesItsAnalysis(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func(envs *detectingEnvs) *env {
		return start(t, dir, nodeConfig{slots: admission.Config{Concurrency: 1}, envs: envs}, nil)
	}
	before := &detectingEnvs{known: map[string]*pyenv.Analysis{}}
	first := open(before)
	blocker, err := first.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, first.eng, blocker) == run.StatusRunning })
	queued, err := first.eng.Submit(ctx, runtest.Script("print:after restart"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := before.counts(); n != 2 {
		t.Fatalf("%d detections before the crash, want 2 (one per submitted project)", n)
	}
	first.crash(t)

	after := &detectingEnvs{known: map[string]*pyenv.Analysis{}}
	second := open(after)
	runtest.WaitFor(t, "the queued job to run after the restart", func() bool {
		return statusOf(t, second.eng, queued).Final()
	})
	x, err := getExec(ctx, second.eng, queued)
	if err != nil || x.Status != run.StatusCompleted || x.Stdout != "after restart" {
		t.Fatalf("queued job after the restart: %v %+v", err, x)
	}
	if detections, remembered := after.counts(); detections != 0 || remembered != 1 {
		t.Errorf("the restarted node detected %d times and was given %d analyses; want 0 and 1", detections, remembered)
	}
}
