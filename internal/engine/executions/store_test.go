package executions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pyexec/pyexec/internal/engine/admission"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

func scriptBy(s, caller string) run.Request {
	r := runtest.Script(s)
	r.Caller = caller
	return r
}

// ids lists the ids of every page of opts, page by page.
func listPages(t *testing.T, eng *Service, opts ListOptions) [][]string {
	t.Helper()
	var out [][]string
	for range 100 {
		page, next, err := eng.List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range page {
			ids = append(ids, x.ID)
		}
		out = append(out, ids)
		if next == "" {
			return out
		}
		opts.Cursor = next
	}
	t.Fatal("listing did not end")
	return nil
}

func TestListFiltersByStatusAndOwnerAndPages(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	ctx := context.Background()
	// a: print, timeout, print; b: print, print, print.
	runs := []struct{ code, caller string }{
		{"print:1", "a"}, {"timeout", "a"}, {"print:2", "b"}, {"print:3", "a"}, {"print:4", "b"}, {"print:5", "b"},
	}
	var ids []string
	for _, r := range runs {
		req := scriptBy(r.code, r.caller)
		req.Timeout = time.Second
		x, err := e.eng.RunSync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
	}
	tests := []struct {
		name string
		opts ListOptions
		want [][]string
	}{
		{"everyone in pages of 4", ListOptions{Limit: 4, AllOwners: true},
			[][]string{{ids[5], ids[4], ids[3], ids[2]}, {ids[1], ids[0]}}},
		{"a in pages of 2", ListOptions{Limit: 2, Owner: "a"}, [][]string{{ids[3], ids[1]}, {ids[0]}}},
		{"b completed", ListOptions{Owner: "b", Status: run.StatusCompleted}, [][]string{{ids[5], ids[4], ids[2]}}},
		{"failed of everyone", ListOptions{Status: run.StatusFailed, AllOwners: true}, [][]string{{ids[1]}}},
		{"failed of b", ListOptions{Status: run.StatusFailed, Owner: "b"}, [][]string{nil}},
		{"another owner sees nothing", ListOptions{Owner: "c"}, [][]string{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := listPages(t, e.eng, tt.opts); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pages %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("listed records carry their output", func(t *testing.T) {
		page, _, err := e.eng.List(ctx, ListOptions{Limit: 1, Owner: "b"})
		if err != nil || len(page) != 1 || page[0].Stdout != "5" {
			t.Errorf("page %+v, %v; want the newest of b with stdout 5", page, err)
		}
	})
	for _, bad := range []ListOptions{{Status: "weird", Owner: "a"}, {Cursor: "***", Owner: "a"}, {Limit: -1, Owner: "a"}, {}} {
		if _, _, err := e.eng.List(ctx, bad); !errors.Is(err, run.ErrInvalid) {
			t.Errorf("List(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestListFindsRunningAmongManyRecords(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 4}}, nil)
	ctx := context.Background()
	id, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocking run to start", func() bool { return statusOf(t, e.eng, id) == run.StatusRunning })
	for i := range 200 {
		if _, err := e.eng.RunSync(ctx, runtest.Script(fmt.Sprintf("print:%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	got := listPages(t, e.eng, ListOptions{Limit: 1, Status: run.StatusRunning, Owner: "tester"})
	if fmt.Sprint(got) != fmt.Sprint([][]string{{id}}) {
		t.Errorf("running = %v, want only %s", got, id)
	}
	if _, err := e.eng.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := listPages(t, e.eng, ListOptions{Limit: 1, Status: run.StatusRunning, AllOwners: true}); fmt.Sprint(got) != "[[]]" {
		t.Errorf("running after the kill = %v, want none", got)
	}
	if got := listPages(t, e.eng, ListOptions{Limit: 1, Status: run.StatusKilled, AllOwners: true}); fmt.Sprint(got) != fmt.Sprint([][]string{{id}}) {
		t.Errorf("killed = %v, want %s", got, id)
	}
}

func TestRecordHoldsOutputOnce(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{}, nil)
	ctx := context.Background()
	text := strings.Repeat(strings.Repeat("x", 99)+"\n", 1000) // 100 KB
	x, err := e.eng.RunSync(ctx, runtest.Script("print:"+text))
	if err != nil {
		t.Fatal(err)
	}
	if x.Stdout != text {
		t.Fatalf("RunSync returned %d bytes of stdout, want %d", len(x.Stdout), len(text))
	}
	raw, err := e.st.Get(ctx, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Value) > 4<<10 || strings.Contains(string(raw.Value), "xxxx") {
		t.Errorf("stored record is %d bytes and holds the output; want metadata only", len(raw.Value))
	}
	got, err := getExec(ctx, e.eng, x.ID)
	if err != nil || got.Stdout != text || got.Stderr != "" {
		t.Fatalf("Get: %d bytes of stdout, %v; want the %d written", len(got.Stdout), err, len(text))
	}
	t.Run("stderr too", func(t *testing.T) {
		x, err := e.eng.RunSync(ctx, runtest.Script("raise"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := getExec(ctx, e.eng, x.ID)
		if err != nil || got.Stderr != x.Stderr || !strings.Contains(got.Stderr, "NameError") {
			t.Errorf("Get: stderr %q, %v; want %q", got.Stderr, err, x.Stderr)
		}
	})
	t.Run("output that is not UTF-8 stays in the record", func(t *testing.T) {
		x, err := e.eng.RunSync(ctx, runtest.Script("print:caf\xe9\n"))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := e.st.Get(ctx, x.ID)
		if err != nil || !strings.Contains(string(raw.Value), `"stdout":"caf`) {
			t.Fatalf("stored record %s, %v; want the output in it", raw.Value, err)
		}
		got, err := getExec(ctx, e.eng, x.ID)
		if err != nil || !strings.HasPrefix(got.Stdout, "caf") {
			t.Errorf("Get: %q, %v", got.Stdout, err)
		}
	})
	t.Run("async", func(t *testing.T) {
		id, err := e.eng.Submit(ctx, runtest.Script("print:"+text))
		if err != nil {
			t.Fatal(err)
		}
		var got *run.Execution
		runtest.WaitFor(t, "the async run to end", func() bool {
			got, err = getExec(ctx, e.eng, id)
			return err == nil && got.Status.Final()
		})
		if got.Status != run.StatusCompleted || got.Stdout != text {
			t.Fatalf("Get: status %s, %d bytes of stdout; want completed with the %d written", got.Status, len(got.Stdout), len(text))
		}
		raw, err := e.st.Get(ctx, id)
		if err != nil || len(raw.Value) > 4<<10 || strings.Contains(string(raw.Value), "xxxx") {
			t.Errorf("stored record is %d bytes (%v) and holds the output; want metadata only", len(raw.Value), err)
		}
	})
	t.Run("output gone with its events", func(t *testing.T) {
		if err := e.st.PurgeEvents(ctx, x.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := getExec(ctx, e.eng, x.ID); !errors.Is(err, run.ErrNotFound) {
			t.Errorf("Get after the events expired = %v, want ErrNotFound", err)
		}
	})
}

func TestEvictionRemovesOldestFinishedFirst(t *testing.T) {
	const limit = 512 << 10
	e := start(t, t.TempDir(), nodeConfig{slots: admission.Config{Concurrency: 2}, exec: Config{StoreMaxBytes: limit, EvictInterval: 20 * time.Millisecond}}, nil)
	ctx := context.Background()
	running, err := e.eng.Submit(ctx, runtest.Script("block"))
	if err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "the blocking run to start", func() bool { return statusOf(t, e.eng, running) == run.StatusRunning })
	text := strings.Repeat(strings.Repeat("y", 99)+"\n", 500) // 50 KB each
	var finished []string
	for range 20 {
		x, err := e.eng.RunSync(ctx, runtest.Script("print:"+text))
		if err != nil {
			t.Fatal(err)
		}
		finished = append(finished, x.ID)
	}
	// Once eviction has settled: what is left of the finished executions
	// is a run of the newest, and the count says how many went.
	var kept []string
	runtest.WaitFor(t, "eviction to settle below the limit", func() bool {
		kept = kept[:0]
		for _, id := range finished {
			if _, err := getExec(ctx, e.eng, id); err == nil {
				kept = append(kept, id)
			} else if !errors.Is(err, run.ErrNotFound) {
				t.Fatal(err)
			}
		}
		s := e.eng.StoreStats()
		return s.UsedBytes > 0 && s.UsedBytes <= limit && int(s.Evictions) == len(finished)-len(kept)
	})
	if statusOf(t, e.eng, running) != run.StatusRunning {
		t.Error("the running execution was evicted")
	}
	if len(kept) == 0 || len(kept) == len(finished) || !slices.Equal(kept, finished[len(finished)-len(kept):]) {
		t.Errorf("kept %d of %d finished records, want a non-empty run of the newest", len(kept), len(finished))
	}
	if s := e.eng.StoreStats(); s.MaxBytes != limit || s.State == StoreFull {
		t.Errorf("stats %+v", s)
	}
	listed := listPages(t, e.eng, ListOptions{Limit: 100, AllOwners: true})
	if len(listed) != 1 || len(listed[0]) != len(kept)+1 {
		t.Errorf("listed %v, want the kept records and the running one", listed)
	}
	if n := eventsOf(t, e, finished[0]); n != 0 {
		t.Errorf("the evicted execution still has %d events", n)
	}
	if _, err := e.eng.Kill(ctx, running); err != nil {
		t.Fatal(err)
	}
}

// eventsOf counts the stored events of id.
func eventsOf(t *testing.T, e *env, id string) int {
	t.Helper()
	n := 0
	err := e.st.ReadEvents(context.Background(), id, func(m store.EventMsg) error {
		var se storedEvent
		if json.Unmarshal(m.Data, &se) == nil {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStoreStatsSignalNearLimit(t *testing.T) {
	e := start(t, t.TempDir(), nodeConfig{exec: Config{StoreMaxBytes: 1 << 30, EvictInterval: time.Hour}}, nil)
	if _, err := e.eng.RunSync(context.Background(), runtest.Script("print:hello")); err != nil {
		t.Fatal(err)
	}
	// The end of an execution triggers a measurement.
	runtest.WaitFor(t, "a measurement", func() bool { return e.eng.StoreStats().UsedBytes > 0 })
	if s := e.eng.StoreStats(); s.State != StoreOK || s.MaxBytes != 1<<30 {
		t.Errorf("store: %+v, want ok", s)
	}
	tests := []struct {
		name        string
		used, limit int64
		full        bool
		want        string
	}{
		{"below 90%", 89, 100, false, StoreOK},
		{"at 90%", 90, 100, false, StoreNearLimit},
		{"above, nothing left to evict", 120, 100, true, StoreFull},
		{"no limit", 1 << 40, 0, false, StoreOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newStoreGauge(tt.limit)
			eng := &Service{gauge: g}
			eng.setGauge(tt.used, 0, tt.full)
			if s := eng.StoreStats(); s.State != tt.want {
				t.Errorf("state %s, want %s", s.State, tt.want)
			}
		})
	}
}

func TestStartIndexesRecordsOfAnOlderDataDir(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir, nodeConfig{}, nil)
	ctx := context.Background()
	var ids []string
	for _, s := range []string{"print:1", "print:2"} {
		x, err := e.eng.RunSync(ctx, runtest.Script(s))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ID)
	}
	e.close(t)
	// A data directory written before the index existed has no index.
	emb, err := store.StartEmbedded(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(emb.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, store.IndexBucket); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
	e = start(t, dir, nodeConfig{}, nil)
	got := listPages(t, e.eng, ListOptions{Limit: 10, Status: run.StatusCompleted, Owner: "tester"})
	if fmt.Sprint(got) != fmt.Sprint([][]string{{ids[1], ids[0]}}) {
		t.Errorf("after restart: %v, want %v", got, ids)
	}
}
