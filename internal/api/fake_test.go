package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/pyenv"
)

// fakeEngine is an in-memory Engine with fixed, deterministic records, for
// testing the HTTP layer alone. Behaviour is keyed by the request so that
// one server can serve every case.
type fakeEngine struct {
	mu       sync.Mutex
	requests []engine.Request
	fail     error // returned by RunSync and Submit when set
	records  map[string]*engine.Execution
	events   map[string][]engine.Event
}

var _ Engine = (*fakeEngine)(nil)

// Fixed ids and times: nanosecond precision on purpose, to check that the
// wire carries at most microseconds.
const (
	idCompleted = "exe_00000000-0000-4000-8000-000000000001"
	idRunning   = "exe_00000000-0000-4000-8000-000000000002"
	idFailed    = "exe_00000000-0000-4000-8000-000000000003"
	idLive      = "exe_00000000-0000-4000-8000-000000000004" // events never end
	idSubmitted = "exe_00000000-0000-4000-8000-0000000000aa"
	idLinted    = "exe_00000000-0000-4000-8000-000000000005" // warnings and lint
	idInstall   = "exe_00000000-0000-4000-8000-000000000006" // install events
)

func fakeTime(sec int) time.Time {
	return time.Date(2025, 1, 2, 3, 4, sec, 123456789, time.UTC)
}

func newFakeEngine() *fakeEngine {
	started, finished := fakeTime(6), fakeTime(7)
	result := "2"
	completed := &engine.Execution{
		ID: idCompleted, Status: engine.StatusCompleted, ExitCode: 0, Stdout: "hello\n",
		Result: &result, StartedAt: &started, FinishedAt: &finished, DurationMs: 1000,
		CPUTimeMs: 12, PeakMemoryBytes: 9 << 20, PythonVersion: "3.12", CreatedAt: fakeTime(5),
	}
	running := &engine.Execution{
		ID: idRunning, Status: engine.StatusRunning, Stdout: "partial\n",
		StartedAt: &started, PythonVersion: "3.12", CreatedAt: fakeTime(4),
	}
	failed := &engine.Execution{
		ID: idFailed, Status: engine.StatusFailed, ExitCode: 124, Stdout: "tick\n",
		Error: "execution timeout after 1s", Reason: engine.ReasonTimeout, TimedOut: true,
		StartedAt: &started, FinishedAt: &finished, DurationMs: 1000, PythonVersion: "3.11", CreatedAt: fakeTime(3),
	}
	linted := &engine.Execution{
		ID: idLinted, Status: engine.StatusCompleted, Stdout: "2\n", StartedAt: &started, FinishedAt: &finished,
		DurationMs: 1000, PythonVersion: "3.12", CreatedAt: fakeTime(2),
		Warnings: []string{`policy rule "eval": call of eval at main.py:1: avoid eval`},
		Lint:     fakeDiagnostics([]engine.File{{Path: "main.py", Data: []byte("import os\n")}}),
	}
	ev := func(seq uint64, typ engine.EventType, data string) engine.Event {
		return engine.Event{Seq: seq, Type: typ, Data: data, Time: fakeTime(int(seq))}
	}
	return &fakeEngine{
		records: map[string]*engine.Execution{idCompleted: completed, idRunning: running, idFailed: failed, idLinted: linted},
		events: map[string][]engine.Event{
			idCompleted: {
				ev(1, engine.EventStatus, "running"),
				ev(2, engine.EventStdout, "hello\n"),
				ev(3, engine.EventStderr, "warn: \"x\"\n"),
				ev(4, engine.EventStatus, "completed"),
			},
			idLive: {ev(1, engine.EventStatus, "running")},
			idInstall: {
				ev(1, engine.EventStatus, "running"),
				ev(2, engine.EventInstall, "installing pyyaml with uv"),
				ev(3, engine.EventInstall, "environment ready in 1.2s"),
				ev(4, engine.EventStdout, "ok\n"),
				ev(5, engine.EventStatus, "completed"),
			},
		},
	}
}

// lastRequest is the engine.Request of the latest RunSync or Submit.
func (f *fakeEngine) lastRequest() (engine.Request, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		return engine.Request{}, false
	}
	return f.requests[len(f.requests)-1], true
}

func (f *fakeEngine) accept(req engine.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if req.PythonVersion == "2.7" {
		return fmt.Errorf("%w: unsupported python_version %q; supported versions: 3.10, 3.11, 3.12, 3.13", engine.ErrInvalid, req.PythonVersion)
	}
	f.requests = append(f.requests, req)
	return nil
}

func (f *fakeEngine) RunSync(_ context.Context, req engine.Request) (*engine.Execution, error) {
	if err := f.accept(req); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := *f.records[idCompleted]
	e.Stdout = "ran " + req.Entrypoint + "\n"
	return &e, nil
}

func (f *fakeEngine) Submit(_ context.Context, req engine.Request) (string, error) {
	if err := f.accept(req); err != nil {
		return "", err
	}
	return idSubmitted, nil
}

func (f *fakeEngine) Get(_ context.Context, _ engine.Caller, id string) (*engine.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.records[id]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", id, engine.ErrNotFound)
	}
	c := *e
	return &c, nil
}

func (f *fakeEngine) Kill(_ context.Context, _ engine.Caller, id string) (engine.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.records[id]
	if !ok {
		return "", engine.ErrNotFound
	}
	if e.Status.Final() {
		return e.Status, nil
	}
	return engine.StatusKilled, nil
}

// List pages by position; the cursor is the index of the next record.
func (f *fakeEngine) List(_ context.Context, opts engine.ListOptions) ([]*engine.Execution, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*engine.Execution
	for _, e := range f.records {
		if opts.Status == "" || e.Status == opts.Status {
			all = append(all, e)
		}
	}
	slices.SortFunc(all, func(a, b *engine.Execution) int { return b.CreatedAt.Compare(a.CreatedAt) })
	start := 0
	if opts.Cursor != "" {
		n, err := strconv.Atoi(opts.Cursor)
		if err != nil || n > len(all) {
			return nil, "", fmt.Errorf("%w: bad cursor", engine.ErrInvalid)
		}
		start = n
	}
	end := min(start+opts.Limit, len(all))
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

// Follow replays the stored events after afterSeq; idLive's stream then
// stays open until ctx ends, like a running execution's.
func (f *fakeEngine) Follow(ctx context.Context, _ engine.Caller, id string, afterSeq uint64) (<-chan engine.Event, error) {
	f.mu.Lock()
	evs, ok := f.events[id]
	f.mu.Unlock()
	if !ok {
		return nil, engine.ErrNotFound
	}
	ch := make(chan engine.Event, len(evs))
	for _, e := range evs {
		if e.Seq > afterSeq {
			ch <- e
		}
	}
	if id != idLive {
		close(ch)
		return ch, nil
	}
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// Lint reports F401 for every "import os" line, rejects lower-case rule
// selectors as the real linter does, and records the files it got.
func (f *fakeEngine) Lint(_ context.Context, files []engine.File, rules pyenv.LintRules) ([]pyenv.Diagnostic, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	for _, r := range slices.Concat(rules.Select, rules.Ignore) {
		if !pyenv.ValidLintRule(r) {
			return nil, fmt.Errorf("%w: %w: %q is not ALL, a linter prefix or a rule code", engine.ErrInvalid, pyenv.ErrBadRule, r)
		}
	}
	f.mu.Lock()
	f.requests = append(f.requests, engine.Request{Files: files})
	f.mu.Unlock()
	if slices.Equal(rules.Select, []string{"E"}) {
		return []pyenv.Diagnostic{}, nil
	}
	return fakeDiagnostics(files), nil
}

// fakeDiagnostics is what the fake linter finds.
func fakeDiagnostics(files []engine.File) []pyenv.Diagnostic {
	out := []pyenv.Diagnostic{}
	for _, file := range files {
		for i, line := range strings.Split(string(file.Data), "\n") {
			if line == "import os" {
				out = append(out, pyenv.Diagnostic{Code: "F401", Message: "`os` imported but unused", Filename: file.Path,
					Location: pyenv.Position{Line: i + 1, Column: 8}, EndLocation: pyenv.Position{Line: i + 1, Column: 10},
					Fix: json.RawMessage(`{"applicability":"safe","message":"Remove unused import: ` + "`os`" + `","edits":[]}`)})
			}
		}
	}
	return out
}

func (f *fakeEngine) Stats() engine.Stats {
	return engine.Stats{Running: 1, Queued: 2, Capacity: 4}
}

// errBoom is an unexpected engine failure.
var errBoom = errors.New("disk on fire at /var/lib/secret")
