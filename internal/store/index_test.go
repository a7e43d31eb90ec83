package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// fill creates n records exe_0000…; record i has the status and owner
// that status(i) and owner(i) choose, and its value names both.
func fill(t *testing.T, s *NATS, n int, status, owner func(int) string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		m := Meta{Status: status(i), Owner: owner(i), Final: status(i) != "running"}
		v := fmt.Appendf(nil, "%s/%s", m.Status, m.Owner)
		if _, err := s.Create(ctx, fmt.Sprintf("exe_%04d", i), v, m); err != nil {
			t.Fatal(err)
		}
	}
}

// pages lists everything opts selects, page by page, and returns the keys
// of each page.
func pages(t *testing.T, s *NATS, opts ListOptions) [][]string {
	t.Helper()
	var out [][]string
	for range 1000 {
		page, next, err := s.List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range page {
			keys = append(keys, e.Key)
		}
		out = append(out, keys)
		if next == "" {
			return out
		}
		opts.Cursor = next
	}
	t.Fatal("listing did not end")
	return nil
}

func keysOf(from, to, step int) []string {
	var k []string
	for i := from; step > 0 && i < to || step < 0 && i > to; i += step {
		k = append(k, fmt.Sprintf("exe_%04d", i))
	}
	return k
}

func TestListFiltersByIndex(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	// 300 records: every 100th is running, the rest completed; owners
	// alternate between a and b.
	status := func(i int) string {
		if i%100 == 0 {
			return "running"
		}
		return "completed"
	}
	owner := func(i int) string { return string(rune('a' + i%2)) }
	fill(t, s, 300, status, owner)

	tests := []struct {
		name string
		opts ListOptions
		want [][]string
	}{
		{"running of everyone, one a page", ListOptions{Limit: 1, Status: "running", AllOwners: true},
			[][]string{{"exe_0200"}, {"exe_0100"}, {"exe_0000"}}},
		{"running of a", ListOptions{Limit: 5, Status: "running", Owner: "a"},
			[][]string{{"exe_0200", "exe_0100", "exe_0000"}}},
		{"nothing of b is running", ListOptions{Limit: 5, Status: "running", Owner: "b"}, [][]string{nil}},
		{"no owner sees only ownerless records", ListOptions{Limit: 5}, [][]string{nil}},
		{"b in pages of 50", ListOptions{Limit: 50, Owner: "b"},
			[][]string{keysOf(299, 199, -2), keysOf(199, 99, -2), keysOf(99, 0, -2)}},
		{"completed of a, exact fit", ListOptions{Limit: 147, Status: "completed", Owner: "a"},
			[][]string{slices.DeleteFunc(keysOf(298, -1, -2), func(k string) bool { return k == "exe_0000" || k == "exe_0100" || k == "exe_0200" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pages(t, s, tt.opts)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("pages\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
	t.Run("bad cursor", func(t *testing.T) {
		if _, _, err := s.List(context.Background(), ListOptions{Cursor: "%%%", Limit: 1}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("got %v, want ErrBadCursor", err)
		}
	})
}

func TestListReadsOnlyThePage(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	fill(t, s, 50, func(i int) string {
		if i == 0 {
			return "running"
		}
		return "completed"
	}, func(int) string { return "" })
	// Match sees every record List reads: one, not fifty.
	reads := 0
	page, next, err := s.List(ctx, ListOptions{Limit: 1, Status: "running", Match: func([]byte) bool { reads++; return true }})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].Key != "exe_0000" || next != "" || reads != 1 {
		t.Errorf("page %v next %q after %d reads; want exe_0000 alone after 1 read", page, next, reads)
	}
}

func TestListRepairsStaleEntries(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	fill(t, s, 3, func(int) string { return "running" }, func(int) string { return "" })
	// exe_0001 finished, but its index entry was not written.
	e, err := s.Get(ctx, "exe_0001")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.records.Update(ctx, "exe_0001", []byte("completed/"), e.Revision); err != nil {
		t.Fatal(err)
	}
	running := func(v []byte) bool { return bytes.HasPrefix(v, []byte("running/")) }
	got := pages(t, s, ListOptions{Limit: 1, Status: "running", Match: running})
	if fmt.Sprint(got) != "[[exe_0002] [exe_0000]]" {
		t.Errorf("pages %v, want the stale record left out", got)
	}
	// What a caller's Match learns it writes back with SetMeta.
	if err := s.SetMeta(ctx, "exe_0001", Meta{Status: "completed", Final: true}); err != nil {
		t.Fatal(err)
	}
	if got := s.OldestFinished(5); fmt.Sprint(got) != "[exe_0001]" {
		t.Errorf("finished records %v, want exe_0001", got)
	}
}

func TestIndexIsSharedAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, emb := open(t, dir, Config{})
	fill(t, s, 10, func(int) string { return "completed" }, func(int) string { return "a" })
	// A second store on the same server (another node) sees the entries
	// the first one writes.
	other, err := Open(ctx, emb.Conn(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "exe_0010", []byte("running/a"), Meta{Status: "running", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !other.index.has("exe_0010") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := pages(t, other, ListOptions{Limit: 3, Status: "running", Owner: "a"}); fmt.Sprint(got) != "[[exe_0010]]" {
		t.Errorf("other node lists %v", got)
	}
	if err := s.Delete(ctx, "exe_0009"); err != nil {
		t.Fatal(err)
	}
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = open(t, dir, Config{})
	got := pages(t, s, ListOptions{Limit: 100, Owner: "a"})
	if want := append([]string{"exe_0010"}, keysOf(8, -1, -1)...); fmt.Sprint(got) != fmt.Sprint([][]string{want}) {
		t.Errorf("after restart %v, want %v", got, want)
	}
}

func TestReindexCoversRecordsWithoutEntries(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	// Records of an older data directory: no index entries.
	for i := range 5 {
		if _, err := s.records.Create(ctx, fmt.Sprintf("exe_%04d", i), []byte("failed")); err != nil {
			t.Fatal(err)
		}
	}
	if got := pages(t, s, ListOptions{Limit: 10, AllOwners: true}); fmt.Sprint(got) != "[[]]" {
		t.Fatalf("unindexed records listed: %v", got)
	}
	describe := func(_ string, v []byte) (Meta, error) { return Meta{Status: string(v), Final: true}, nil }
	n, err := s.Reindex(ctx, describe)
	if err != nil || n != 5 {
		t.Fatalf("Reindex = %d, %v; want 5", n, err)
	}
	if n, err := s.Reindex(ctx, describe); err != nil || n != 0 {
		t.Errorf("second Reindex = %d, %v; want 0", n, err)
	}
	if got := pages(t, s, ListOptions{Limit: 10, Status: "failed"}); fmt.Sprint(got) != fmt.Sprint([][]string{keysOf(4, -1, -1)}) {
		t.Errorf("after Reindex %v", got)
	}
}

func TestIndexListsFollowTheirEntries(t *testing.T) {
	ix := newIndex(time.Hour)
	now := time.Now()
	ix.put("exe_1", Meta{Status: "running", Owner: "a"}, 1, now)
	ix.put("exe_2", Meta{Status: "running", Owner: "b"}, 2, now)
	ix.put("exe_3", Meta{Status: "completed", Owner: "a", Final: true}, 3, now.Add(-2*time.Hour)) // expired
	// exe_1 finishes; a stale write of its old entry arrives afterwards.
	ix.put("exe_1", Meta{Status: "completed", Owner: "a", Final: true}, 4, now)
	ix.put("exe_1", Meta{Status: "running", Owner: "a"}, 1, now)
	tests := []struct {
		name string
		sel  string
		want []string
	}{
		{"running of everyone", selector("running", "", true), []string{"exe_2"}},
		{"running of a", selector("running", "a", false), nil},
		{"completed of a, the expired one left out", selector("completed", "a", false), []string{"exe_1"}},
		{"everything of a", selector("", "a", false), []string{"exe_1"}},
		{"everything", selAll, []string{"exe_2", "exe_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ix.newest(tt.sel, "", 10); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := ix.oldest(selFinished, 10); !slices.Equal(got, []string{"exe_1", "exe_3"}) {
		t.Errorf("finished %v before pruning", got)
	}
	ix.pruneExpired()
	ix.remove("exe_2")
	if got := ix.oldest(selFinished, 10); !slices.Equal(got, []string{"exe_1"}) {
		t.Errorf("finished %v after pruning", got)
	}
	if len(ix.entries) != 1 || len(ix.lists) != len(selectorsOf(ix.entries["exe_1"].Meta)) {
		t.Errorf("%d entries in %d lists left, want exe_1 alone", len(ix.entries), len(ix.lists))
	}
}
