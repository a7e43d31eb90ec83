package executions

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

func TestRunSyncMapsOutcomes(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	tests := []struct {
		name      string
		req       run.Request
		status    run.Status
		reason    string
		exit      int
		errMsg    string
		stdout    string
		errorType string
		timedOut  bool
		truncated bool
	}{
		{name: "ok", req: runtest.Script("print:hello\nworld\n"), status: run.StatusCompleted, stdout: "hello\nworld\n"},
		{name: "python exception", req: runtest.Script("raise"), status: run.StatusCompleted, exit: 1,
			errMsg: "name 'x' is not defined", errorType: "NameError"},
		{name: "timeout keeps partial output", req: func() run.Request { r := runtest.Script("timeout"); r.Timeout = 2 * time.Second; return r }(),
			status: run.StatusFailed, reason: run.ReasonTimeout, exit: 124, errMsg: "execution timeout after 2s", stdout: "partial\n", timedOut: true},
		{name: "oom", req: runtest.Script("oom"), status: run.StatusFailed, reason: run.ReasonOOM, exit: 137,
			errMsg: "out of memory: memory limit of 4194304 bytes exceeded"},
		{name: "output limit", req: runtest.Script("output_limit"), status: run.StatusFailed, reason: run.ReasonOutputLimit, exit: 137,
			errMsg: "output limit exceeded: stdout exceeded the limit of 4 bytes", stdout: "xxxx", truncated: true},
		{name: "setup error", req: runtest.Script("setup_error"), status: run.StatusFailed, reason: run.ReasonSetupError, exit: 1,
			errMsg: "sandbox setup failed: mounting /work: permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := e.eng.RunSync(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if x.Status != tt.status || x.Reason != tt.reason || x.ExitCode != tt.exit || x.Error != tt.errMsg {
				t.Errorf("got status=%s reason=%q exit=%d error=%q; want %s %q %d %q",
					x.Status, x.Reason, x.ExitCode, x.Error, tt.status, tt.reason, tt.exit, tt.errMsg)
			}
			if x.Stdout != tt.stdout || x.ErrorType != tt.errorType || x.TimedOut != tt.timedOut || x.StdoutTruncated != tt.truncated {
				t.Errorf("got stdout=%q error_type=%q timed_out=%v truncated=%v", x.Stdout, x.ErrorType, x.TimedOut, x.StdoutTruncated)
			}
			if !strings.HasPrefix(x.ID, "exe_") || x.StartedAt == nil || x.FinishedAt == nil || x.PythonVersion != "3.11.2" {
				t.Errorf("incomplete record: %+v", x)
			}
			stored, err := getExec(context.Background(), e.eng, x.ID)
			if err != nil || stored.Status != x.Status || stored.Stdout != x.Stdout {
				t.Errorf("stored record = %+v, %v; want it to match the returned one", stored, err)
			}
		})
	}
	t.Run("audit trail has one record per execution", func(t *testing.T) {
		recs := auditRecords(t, e)
		if len(recs) != len(tests) {
			t.Fatalf("audit holds %d records, want %d", len(recs), len(tests))
		}
		first := recs[0]
		if first.Caller != "tester" || first.ClientAddr != "127.0.0.1:5555" || first.Status != run.StatusCompleted ||
			len(first.CodeSHA256) != 64 || first.Limits.TimeoutMs != 30000 || first.PeakMemoryBytes != 10<<20 {
			t.Errorf("first audit record = %+v", first)
		}
		if recs[2].Reason != run.ReasonTimeout || recs[2].ExitCode != 124 || recs[2].Limits.TimeoutMs != 2000 {
			t.Errorf("timeout audit record = %+v", recs[2])
		}
	})
}

// auditRecords are the audit trail's records of ended executions.
func auditRecords(t *testing.T, e *env) []auditRecord {
	t.Helper()
	var out []auditRecord
	for _, m := range runtest.AuditLines(t, e.st) {
		var r auditRecord
		if err := json.Unmarshal(m, &r); err != nil {
			t.Fatal(err)
		}
		if r.Action == actionEnd {
			out = append(out, r)
		}
	}
	return out
}

func TestInvalidRequestsAreRefused(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	tests := []struct {
		name string
		req  run.Request
		want string
	}{
		{"network not allowed", func() run.Request { r := runtest.Script("print:x"); r.Network = true; return r }(), "network access is disabled on this server"},
		{"unknown python", func() run.Request { r := runtest.Script("print:x"); r.PythonVersion = "2.7"; return r }(), `unsupported python_version "2.7"; supported versions: 3.11`},
		{"entrypoint outside the workspace", func() run.Request { r := runtest.Script("print:x"); r.Entrypoint = "/etc/passwd"; return r }(), `entrypoint "/etc/passwd" is not a path inside the workspace`},
		{"timeout above max", func() run.Request { r := runtest.Script("print:x"); r.Timeout = time.Hour; return r }(), "exceeds the server's limit"},
		{"bad env", func() run.Request { r := runtest.Script("print:x"); r.Env = []string{"NOVALUE"}; return r }(), `"NOVALUE" is not KEY=value`},
		{"hostile path", run.Request{Files: []run.File{{Path: "../x.py"}}, Entrypoint: "x.py"}, `contains ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.eng.RunSync(context.Background(), tt.req)
			if !errors.Is(err, run.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RunSync: got %v, want ErrInvalid containing %q", err, tt.want)
			}
			if _, err := e.eng.Submit(context.Background(), tt.req); !errors.Is(err, run.ErrInvalid) {
				t.Errorf("Submit: got %v, want ErrInvalid", err)
			}
		})
	}
	if n := e.runner.Runs.Load(); n != 0 {
		t.Errorf("the runner ran %d times for invalid requests", n)
	}
}

func TestOverloadWithConcurrencyOneQueueOne(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 1}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make([]*run.Execution, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x, err := e.eng.RunSync(ctx, runtest.Script("block"))
			if err != nil {
				t.Errorf("RunSync %d: %v", i, err)
			}
			results[i] = x
		}()
		want := admission.Stats{Running: 1, Queued: i, Capacity: 1, QueueSize: 1}
		runtest.WaitFor(t, "admission", func() bool { return e.node.adm.Stats() == want })
	}
	if _, err := e.eng.RunSync(context.Background(), runtest.Script("print:x")); !errors.Is(err, admission.ErrOverloaded) {
		t.Errorf("third sync request: got %v, want ErrOverloaded", err)
	}
	if _, err := e.eng.Submit(context.Background(), runtest.Script("print:x")); !errors.Is(err, admission.ErrOverloaded) {
		t.Errorf("async request at capacity: got %v, want ErrOverloaded", err)
	}
	cancel() // the callers go away: both end killed
	wg.Wait()
	for i, x := range results {
		if x == nil || x.Status != run.StatusKilled {
			t.Errorf("request %d ended %+v, want killed", i, x)
		}
	}
	if got := e.node.adm.Stats(); got.Running != 0 || got.Queued != 0 {
		t.Errorf("stats after the callers left = %+v", got)
	}
}

func TestKillRunningAsyncStaysKilled(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	ctx := context.Background()
	id, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := follow(ctx, e.eng, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for ev := range events { // wait for the partial output to be live
		if ev.Type == EventStdout {
			break
		}
	}
	status, err := e.eng.Kill(ctx, id)
	if err != nil || status != run.StatusKilled {
		t.Fatalf("Kill = %s, %v; want killed", status, err)
	}
	check := func() {
		t.Helper()
		x, err := getExec(ctx, e.eng, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusKilled || x.ExitCode != 137 || x.Stdout != "partial\n" || x.Reason != run.ReasonKilled {
			t.Errorf("record = status %s exit %d stdout %q reason %q; want killed 137 \"partial\\n\" killed",
				x.Status, x.ExitCode, x.Stdout, x.Reason)
		}
	}
	check()
	time.Sleep(200 * time.Millisecond)
	check()
	if status, err := e.eng.Kill(ctx, id); err != nil || status != run.StatusKilled {
		t.Errorf("second Kill = %s, %v; want the current status killed", status, err)
	}
	if _, err := e.eng.Kill(ctx, "exe_nope"); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("Kill(unknown) = %v, want ErrNotFound", err)
	}
}

// A caller who killed an execution may submit again at once: the slot
// the killed execution held is free when Kill answers, not some time
// after (a full node refused the next submission with 429 otherwise).
func TestKillAnswersWithTheSlotFree(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 1}}, nil)
	ctx := context.Background()
	for i := range 5 {
		id, err := e.eng.Submit(ctx, runtest.Script("block"))
		if err != nil {
			t.Fatalf("submission %d right after a kill: %v", i, err)
		}
		runtest.WaitFor(t, "the execution to run", func() bool { return statusOf(t, e.eng, id) == run.StatusRunning })
		// Holding the service's lock keeps the owner's release from
		// finishing after it has answered the kill: the widest the window
		// between the answer and the end of the worker can be.
		e.eng.mu.Lock()
		st, err := e.eng.Kill(ctx, id)
		got := e.node.adm.Stats()
		e.eng.mu.Unlock()
		if err != nil || st != run.StatusKilled {
			t.Fatalf("Kill = %s, %v; want killed", st, err)
		}
		if got.Running != 0 || got.Queued != 0 {
			t.Fatalf("kill %d answered with the node's load at %+v, want nothing running or queued", i, got)
		}
	}
}

// The same for an execution that ended by itself: a follower that sees
// its final status finds its slot free.
func TestAnEndedExecutionsSlotIsFreeWhenItIsSeenEnded(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 1}}, nil)
	ctx := context.Background()
	for i := range 3 {
		id, err := e.eng.Submit(ctx, runtest.Script("sleep:300ms"))
		if err != nil {
			t.Fatalf("submission %d right after the end of the one before: %v", i, err)
		}
		events, err := follow(ctx, e.eng, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		// As above: once it runs (it took the lock to begin), the owner's
		// release cannot finish while the lock is held, so only a slot
		// given back before the end is seen counts.
		locked := false
		for ev := range events {
			if ev.Type == EventStatus && ev.Data == string(run.StatusRunning) && !locked {
				e.eng.mu.Lock()
				locked = true
			}
			if ev.Type == EventStatus && run.Status(ev.Data).Final() {
				break
			}
		}
		got := e.node.adm.Stats()
		if locked {
			e.eng.mu.Unlock()
		}
		if got.Running != 0 || got.Queued != 0 {
			t.Fatalf("execution %d seen ended with the node's load at %+v, want nothing running or queued", i, got)
		}
	}
}

func TestKillQueuedJobNeverRuns(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 1, QueueSize: 4}}, nil)
	ctx := context.Background()
	blocker, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocker to run", func() bool { return statusOf(t, e.eng, blocker) == run.StatusRunning })
	queued, err := e.eng.Submit(ctx, runtest.Script("print:never"))
	if err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, e.eng, queued); st != run.StatusPending {
		t.Fatalf("queued job is %s, want pending", st)
	}
	if st, err := e.eng.Kill(ctx, queued); err != nil || st != run.StatusKilled {
		t.Fatalf("Kill(queued) = %s, %v", st, err)
	}
	if st, err := e.eng.Kill(ctx, blocker); err != nil || st != run.StatusKilled {
		t.Fatalf("Kill(blocker) = %s, %v", st, err)
	}
	runtest.WaitFor(t, "the queue to drain", func() bool {
		d, err := e.st.QueueDepth(ctx)
		return err == nil && d == 0 && e.node.adm.Stats().Running == 0
	})
	if n := e.runner.Runs.Load(); n != 1 {
		t.Errorf("runner ran %d times, want 1 (the killed job must not run)", n)
	}
	x, _ := getExec(ctx, e.eng, queued)
	if x.Status != run.StatusKilled || x.Error != msgKilledQueued || x.StartedAt != nil {
		t.Errorf("queued job record = %+v", x)
	}
}

func TestFollowReplaysFinishedExecutionInOrder(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	ctx := context.Background()
	x, err := e.eng.RunSync(ctx, runtest.Script("print:a\nb\nc\n"))
	if err != nil {
		t.Fatal(err)
	}
	collect := func(after uint64) []string {
		t.Helper()
		ch, err := follow(ctx, e.eng, x.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		want := after + 1
		for ev := range ch {
			if ev.Seq != want {
				t.Errorf("event seq %d, want %d", ev.Seq, want)
			}
			want++
			got = append(got, string(ev.Type)+":"+ev.Data)
		}
		return got
	}
	all := collect(0)
	var stdout strings.Builder
	for _, ev := range all {
		if d, ok := strings.CutPrefix(ev, "stdout:"); ok {
			stdout.WriteString(d)
		}
	}
	if len(all) < 4 || all[0] != "status:pending" || all[1] != "status:running" ||
		all[len(all)-1] != "status:completed" || stdout.String() != "a\nb\nc\n" {
		t.Fatalf("replayed events = %q", all)
	}
	tests := []struct {
		name  string
		after uint64
	}{
		{"resumed after running", 2},
		{"resumed before the final status", uint64(len(all) - 1)},
		{"after the last", uint64(len(all))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := all[tt.after:]
			if got := collect(tt.after); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("events = %q, want %q", got, want)
			}
		})
	}
	if _, err := follow(ctx, e.eng, "exe_nope", 0); !errors.Is(err, run.ErrNotFound) {
		t.Errorf("Follow(unknown) = %v, want ErrNotFound", err)
	}
}

func TestTimestampsHaveAtMostSixFractionalDigits(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	x, err := e.eng.RunSync(context.Background(), runtest.Script("print:x"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"(created_at|started_at|finished_at)":"[^"]*"`)
	stamps := re.FindAllString(string(b), -1)
	if len(stamps) != 3 {
		t.Fatalf("timestamps in %s: %v", b, stamps)
	}
	frac := regexp.MustCompile(`\.\d{7,}`)
	for _, s := range stamps {
		if frac.MatchString(s) {
			t.Errorf("%s has more than 6 fractional digits", s)
		}
	}
}
