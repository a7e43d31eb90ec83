package sessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
)

// waitFor polls cond until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hibernated waits until session id hibernated.
func hibernated(t *testing.T, svc *Service, id string) {
	t.Helper()
	waitFor(t, 10*time.Second, id+" hibernated", func() bool { return live(t, svc, id).Info().State == Hibernated })
}

// TestStuckHibernationDoesNotStallReaping: while one tenant's session
// takes long to save (its store write hangs), another tenant's session
// past its idle timeout still ends on time, and the slow one hibernates
// once its store answers.
func TestStuckHibernationDoesNotStallReaping(t *testing.T) {
	v := newVault(t)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	v.set(func(v *memVault) { v.holdBegin = hold })
	svc := newServiceWith(t, Config{HibernateAfter: 200 * time.Millisecond, ReapInterval: 50 * time.Millisecond, SaveTimeout: time.Minute}, true, v)
	t.Cleanup(release) // before the service's, which would wait for the save
	stuck := newSession(t, svc, Request{Caller: "alice"})
	waitFor(t, 10*time.Second, "alice's session began to hibernate", func() bool { return v.attempts() > 0 })
	other := newSession(t, svc, Request{Caller: "bob", IdleTimeout: time.Second})
	created := time.Now()
	waitFor(t, 5*time.Second, "bob's idle session was ended", func() bool {
		_, err := svc.Lookup(other)
		return errors.Is(err, ErrNotFound)
	})
	if took := time.Since(created); took > 3*time.Second {
		t.Errorf("bob's session, idle for 1s, ended after %s", took)
	}
	if st := live(t, svc, stuck).Info().State; st != Busy {
		t.Fatalf("alice's session while it saves: %s, want busy (the test did not hold its save)", st)
	}
	release()
	hibernated(t, svc, stuck)
}

// TestFailedHibernationBacksOff: a session whose save fails stays awake,
// keeps its variables, and is not tried again at every tick of the reaper.
func TestFailedHibernationBacksOff(t *testing.T) {
	v := newVault(t)
	v.set(func(v *memVault) { v.failBegin = errors.New("the store is full") })
	svc := newServiceWith(t, Config{HibernateAfter: 100 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, true, v)
	id := newSession(t, svc, Request{})
	cell(t, svc, id, "x = 41")
	waitFor(t, 10*time.Second, "a hibernation was tried", func() bool { return svc.Stats().HibernateFailed > 0 })
	time.Sleep(time.Second) // 50 ticks
	if n := v.attempts(); n != 1 {
		t.Errorf("%d hibernations tried in 1s after the first failed, want 1 (backoff)", n)
	}
	if r := cell(t, svc, id, "x + 1"); result(r) != "42" || r.Resumed {
		t.Errorf("the session after its failed hibernation: %q resumed=%v", result(r), r.Resumed)
	}
}

// TestSessionEndedWhileHibernatingLeavesNoSnapshot: a session deleted
// while its hibernation snapshot is being stored leaves none behind.
func TestSessionEndedWhileHibernatingLeavesNoSnapshot(t *testing.T) {
	v := newVault(t)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	v.set(func(v *memVault) { v.holdCommit = hold })
	svc := newServiceWith(t, Config{HibernateAfter: 100 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, true, v)
	t.Cleanup(release)
	id := newSession(t, svc, Request{})
	cell(t, svc, id, "x = 1")
	waitFor(t, 10*time.Second, "the hibernation began", func() bool { return v.attempts() > 0 })
	time.Sleep(300 * time.Millisecond) // the state and files written, Commit waiting
	svc.Delete(live(t, svc, id))
	release()
	waitFor(t, 10*time.Second, "the hibernation ended", func() bool {
		st := svc.Stats()
		return st.Live == 0 && len(v.ids()) == 0
	})
	time.Sleep(200 * time.Millisecond)
	if ids := v.ids(); len(ids) != 0 {
		t.Errorf("snapshots left by a deleted session: %v", ids)
	}
}

// TestResumeFailures: a resume that fails for a reason that may pass (the
// store) leaves the session hibernated with its snapshot and answers
// ErrUnavailable, and the next call resumes it; a snapshot that does not
// verify ends the session and is deleted.
func TestResumeFailures(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{HibernateAfter: 300 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, true, v)
	id := newSession(t, svc, Request{})
	cell(t, svc, id, "x = 'kept'")
	hibernated(t, svc, id)
	v.set(func(v *memVault) { v.failOpen = errors.New("nats: timeout") })
	_, err := executeCell(context.Background(), svc, id, CellRequest{Code: "x", EvalLastExpr: true})
	if !errors.Is(err, run.ErrUnavailable) {
		t.Fatalf("a resume while the store fails: %v, want ErrUnavailable", err)
	}
	if st := live(t, svc, id).Info().State; st != Hibernated || len(v.ids()) != 1 {
		t.Fatalf("after a failed resume: %s with %d snapshots, want hibernated with its snapshot", st, len(v.ids()))
	}
	v.set(func(v *memVault) { v.failOpen = nil })
	if r := cell(t, svc, id, "x"); result(r) != "'kept'" || !r.Resumed {
		t.Fatalf("once the store answers: %q resumed=%v", result(r), r.Resumed)
	}

	hibernated(t, svc, id)
	v.set(func(v *memVault) {
		for k, b := range v.m {
			b[len(b)/2] ^= 1 // tampered with in the store
			v.m[k] = b
		}
	})
	_, err = executeCell(context.Background(), svc, id, CellRequest{Code: "x"})
	if !errors.Is(err, ErrEnded) {
		t.Fatalf("a resume from a tampered snapshot: %v, want ErrEnded", err)
	}
	if _, err := svc.Lookup(id); !errors.Is(err, ErrNotFound) || len(v.ids()) != 0 {
		t.Errorf("after the tampered resume: lookup %v, %d snapshots; want the session and its snapshot gone", err, len(v.ids()))
	}
}

// TestFileCallsAreActivity: listing a hibernated session's files resumes
// it and counts as activity, so it is not hibernated again at once.
func TestFileCallsAreActivity(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{HibernateAfter: time.Second, ReapInterval: 20 * time.Millisecond}, true, v)
	id := newSession(t, svc, Request{})
	cell(t, svc, id, "open('a.txt', 'w').write('a')")
	hibernated(t, svc, id)
	files, err := svc.ListFiles(context.Background(), live(t, svc, id))
	if err != nil || len(files) != 1 || files[0].Path != "a.txt" {
		t.Fatalf("files of the hibernated session: %+v, %v", files, err)
	}
	time.Sleep(500 * time.Millisecond) // 25 ticks, half the delay
	if st := live(t, svc, id).Info().State; st != Idle {
		t.Errorf("500ms after a file call: %s, want idle (the call was activity)", st)
	}
	if err := svc.PutFile(context.Background(), live(t, svc, id), "b.txt", []byte("b")); err != nil {
		t.Fatal(err)
	}
	hibernated(t, svc, id)
	if r := cell(t, svc, id, "open('b.txt').read()"); result(r) != "'b'" || !r.Resumed {
		t.Errorf("a file written before a hibernation, after it: %q resumed=%v", result(r), r.Resumed)
	}
}

// TestPoisonedHibernationEnds: a hibernation whose load ends the
// interpreter every time is retried (503) only until maxLoadFailures
// loads in a row failed; then the session ends and its snapshot is gone,
// instead of answering "retry later" until its idle timeout.
func TestPoisonedHibernationEnds(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{HibernateAfter: 300 * time.Millisecond, ReapInterval: 50 * time.Millisecond}, false, v)
	id := newSession(t, svc, Request{Caller: "alice", IdleTimeout: time.Hour})
	cell(t, svc, id, "import os\nclass P:\n    def __reduce__(self):\n        return (os._exit, (3,))\nx = P()")
	hibernated(t, svc, id)
	for i := 1; i < maxLoadFailures; i++ {
		_, err := executeCell(context.Background(), svc, id, CellRequest{Code: "1", Timeout: 10 * time.Second})
		if !errors.Is(err, run.ErrUnavailable) {
			t.Fatalf("load %d that ended the interpreter: %v, want ErrUnavailable (it may pass)", i, err)
		}
	}
	_, err := executeCell(context.Background(), svc, id, CellRequest{Code: "1", Timeout: 10 * time.Second})
	if !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "ended the interpreter") {
		t.Fatalf("load %d that ended the interpreter: %v, want the session ended, saying why", maxLoadFailures, err)
	}
	if _, err := svc.Lookup(id); !errors.Is(err, ErrNotFound) || len(v.ids()) != 0 {
		t.Errorf("after the last failed load: lookup %v, %d snapshots; want the session and its snapshot gone", err, len(v.ids()))
	}
}

// TestHibernationOutcomes: a session whose interpreter ends as it is
// saved for hibernation (a pickling hook that exits) ends and is counted
// as ended, not as a failed save; a save the store refuses is counted as
// failed, and that session stays awake with its variables.
func TestHibernationOutcomes(t *testing.T) {
	v := newVault(t)
	svc := newServiceWith(t, Config{HibernateAfter: 100 * time.Millisecond, ReapInterval: 20 * time.Millisecond}, true, v)
	ends := newSession(t, svc, Request{})
	cell(t, svc, ends, "import os\nclass Boom:\n    def __reduce__(self):\n        os._exit(3)\nb = Boom()")
	waitFor(t, 10*time.Second, "the session whose save exits ended", func() bool {
		_, err := svc.Lookup(ends)
		return errors.Is(err, ErrNotFound)
	})
	if st := svc.Stats(); st.HibernateEnded != 1 || st.HibernateFailed != 0 || st.Hibernated != 0 {
		t.Errorf("after an interpreter ended in its hibernation: %d ended, %d failed, %d saved, want 1, 0, 0",
			st.HibernateEnded, st.HibernateFailed, st.Hibernated)
	}
	v.set(func(v *memVault) { v.failBegin = errors.New("the store is full") })
	fails := newSession(t, svc, Request{})
	cell(t, svc, fails, "x = 41")
	waitFor(t, 10*time.Second, "a hibernation failed", func() bool { return svc.Stats().HibernateFailed > 0 })
	if st := svc.Stats(); st.HibernateEnded != 1 || st.HibernateFailed != 1 || st.Hibernated != 0 {
		t.Errorf("after a save the store refused: %d ended, %d failed, %d saved, want 1, 1, 0",
			st.HibernateEnded, st.HibernateFailed, st.Hibernated)
	}
	if r := cell(t, svc, fails, "x + 1"); result(r) != "42" {
		t.Errorf("the session whose save failed: %q (%s %s)", result(r), r.Reason, r.Error)
	}
}
