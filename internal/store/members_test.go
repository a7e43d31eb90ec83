package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemberRemovalIsCompareAndSet checks the writes that claim a silent
// node's entry: an update or removal at a revision the node wrote past
// fails, and of many removers that saw the same revision exactly one
// wins.
func TestMemberRemovalIsCompareAndSet(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	rev, err := s.CreateMember(ctx, "a", []byte(`1`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateMember(ctx, "a", []byte(`again`)); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateMember: got %v, want ErrExists", err)
	}
	newer, err := s.PutMember(ctx, "a", []byte(`2`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(ctx, "a", rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("removing at a stale revision: got %v, want ErrConflict", err)
	}
	if _, err := s.UpdateMember(ctx, "a", []byte(`mark`), rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("updating at a stale revision: got %v, want ErrConflict", err)
	}
	if newer, err = s.UpdateMember(ctx, "a", []byte(`3`), newer); err != nil {
		t.Fatalf("updating at the latest revision: %v", err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.RemoveMember(ctx, "a", newer)
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, ErrConflict):
				t.Errorf("RemoveMember: %v", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d removers won, want exactly 1", won.Load())
	}
	if _, err := s.GetMember(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetMember after removal: got %v, want ErrNotFound", err)
	}
	if _, err := s.CreateMember(ctx, "a", []byte(`back`)); err != nil {
		t.Errorf("CreateMember after removal: %v", err)
	}
}

// TestWatchMembers checks that a watcher gets the current entries, the
// end of them, then puts and removals as they happen.
func TestWatchMembers(t *testing.T) {
	s, _ := open(t, t.TempDir(), Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.PutMember(ctx, "a", []byte(`a1`)); err != nil {
		t.Fatal(err)
	}
	ch, err := s.WatchMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() MemberEvent {
		t.Helper()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended early")
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
		return MemberEvent{}
	}
	if ev := next(); ev.Key != "a" || string(ev.Value) != "a1" || ev.Deleted || ev.Synced {
		t.Fatalf("first event %+v, want a's entry", ev)
	}
	if ev := next(); !ev.Synced {
		t.Fatalf("second event %+v, want the end of the current entries", ev)
	}
	rev, err := s.PutMember(ctx, "b", []byte(`b1`))
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Key != "b" || string(ev.Value) != "b1" || ev.Revision != rev || ev.Deleted {
		t.Fatalf("event %+v, want b's new entry at revision %d", ev, rev)
	}
	if err := s.RemoveMember(ctx, "b", rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Key != "b" || !ev.Deleted {
		t.Fatalf("event %+v, want b removed", ev)
	}
	cancel()
	for range ch {
	}
}
