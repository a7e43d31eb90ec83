package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/engine/sessions"
	"github.com/pyexec/pyexec/internal/snapshot"
)

// TestSnapshotTenancy: a snapshot belongs to the key whose session it was
// made of. Another key is told it does not exist, exactly as for an
// unknown id, whether it restores, deletes or lists; an admin lists and
// deletes it (audited) but cannot restore it; its owner restores it into a
// session that holds the saved variables, and a fork diverges from its
// parent.
func TestSnapshotTenancy(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{}, Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	admin := Caller{Name: "ops", Admin: true}
	cell := func(id string, c Caller, code string) string {
		t.Helper()
		r, err := e.eng.ExecuteCell(ctx, id, c, CellRequest{Code: code, EvalLastExpr: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Result == nil {
			return r.Stderr
		}
		return *r.Result
	}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cell(s.ID, a, "x = 'kept'")
	if _, err := e.eng.SnapshotSession(ctx, s.ID, b); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("b snapshots a's session: %v", err)
	}
	if _, err := e.eng.ForkSession(ctx, s.ID, b); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("b forks a's session: %v", err)
	}
	saved, err := e.eng.SnapshotSession(ctx, s.ID, a)
	if err != nil {
		t.Fatal(err)
	}

	unknown := "snap_000000000000000000000000"
	_, unknownErr := e.eng.CreateSession(ctx, SessionRequest{Caller: b.Name, FromSnapshot: unknown})
	want := unknownErr.Error()[:len(unknownErr.Error())-len(unknown)] + saved.ID
	_, restoreB := e.eng.CreateSession(ctx, SessionRequest{Caller: b.Name, FromSnapshot: saved.ID})
	_, restoreAdmin := e.eng.CreateSession(ctx, SessionRequest{Caller: admin.Name, FromSnapshot: saved.ID})
	for call, err := range map[string]error{"restore by b": restoreB, "restore by the admin": restoreAdmin,
		"delete by b": e.eng.DeleteSnapshot(ctx, saved.ID, b)} {
		if !errors.Is(err, ErrSnapshotNotFound) || err.Error() != want {
			t.Errorf("%s: %v, want %q", call, err, want)
		}
	}
	list := func(c Caller) int {
		t.Helper()
		l, err := e.eng.ListSnapshots(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	if n := list(b); n != 0 {
		t.Errorf("b lists %d snapshots", n)
	}
	if n := list(Caller{}); n != 0 {
		t.Errorf("a caller without a name lists %d snapshots", n)
	}
	if n, m := list(a), list(admin); n != 1 || m != 1 {
		t.Errorf("a lists %d snapshots, the admin %d; want 1 each", n, m)
	}
	if got := len(e.eng.ListSessions(ctx, admin)); got != 1 {
		t.Errorf("the refused restores left %d sessions, want a's 1", got)
	}

	r, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, FromSnapshot: saved.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := cell(r.ID, a, "x"); got != "'kept'" || r.FromSnapshot != saved.ID {
		t.Errorf("the restored session holds x = %s (%+v)", got, r)
	}
	f, err := e.eng.ForkSession(ctx, r.ID, a)
	if err != nil {
		t.Fatal(err)
	}
	cell(f.ID, a, "x = 'fork'")
	if got, fork := cell(r.ID, a, "x"), cell(f.ID, a, "x"); got != "'kept'" || fork != "'fork'" {
		t.Errorf("after the fork changed x: parent %s, fork %s", got, fork)
	}

	if err := e.eng.DeleteSnapshot(ctx, saved.ID, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, FromSnapshot: saved.ID}); !errors.Is(err, ErrSnapshotNotFound) {
		t.Errorf("restoring a deleted snapshot: %v", err)
	}
	var deleted []actionRecord
	for _, r := range auditActions(t, e) {
		if r.Action == actionSnapshot {
			deleted = append(deleted, r)
		}
	}
	if len(deleted) != 1 || deleted[0].Caller != "ops" || deleted[0].Owner != "a" || deleted[0].SnapshotID != saved.ID {
		t.Errorf("snapshot audit = %+v, want the admin's delete of a's snapshot", deleted)
	}
}

// TestTamperedSnapshotIsRefused: a stored snapshot changed by one byte, or
// given another owner's label in the store, is refused: no session is
// made of it.
func TestTamperedSnapshotIsRefused(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{}, Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a := Caller{Name: "a"}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "x = 1"}); err != nil {
		t.Fatal(err)
	}
	saved, err := e.eng.SnapshotSession(ctx, s.ID, a)
	if err != nil {
		t.Fatal(err)
	}
	rc, info, err := e.st.GetSnapshot(ctx, saved.ID)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, owner string, b []byte) {
		t.Helper()
		in := info
		in.ID, in.Owner = id, owner
		if _, err := e.st.PutSnapshot(ctx, in, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	edited := bytes.Clone(orig)
	edited[len(edited)/2] ^= 1
	put("snap_edited00000000000000000", "a", edited)
	put("snap_relabeled00000000000000", "b", orig) // a's snapshot under b's name
	for id, c := range map[string]Caller{"snap_edited00000000000000000": a, "snap_relabeled00000000000000": {Name: "b"}} {
		if _, err := e.eng.CreateSession(ctx, SessionRequest{Caller: c.Name, FromSnapshot: id}); !errors.Is(err, ErrSnapshotIntegrity) {
			t.Errorf("restoring %s: %v, want ErrSnapshotIntegrity", id, err)
		}
	}
	if n := e.eng.SessionStats().Live; n != 1 {
		t.Errorf("%d live sessions after the refused restores, want a's 1", n)
	}
}

// TestHibernationThroughTheStore: a hibernated session's snapshot is in the
// store but not among its key's snapshots; the next cell resumes the
// session from it and it is deleted.
func TestHibernationThroughTheStore(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{Sessions: SessionConfig{HibernateAfter: time.Second, ReapInterval: 50 * time.Millisecond}},
		Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a := Caller{Name: "a"}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "x = 'asleep'"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := e.eng.GetSession(ctx, s.ID, a)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == sessions.Hibernated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stored, err := e.st.ListSnapshots(ctx)
	if err != nil || len(stored) != 1 || stored[0].Kind != snapshot.KindHibernation || stored[0].Owner != "a" {
		t.Fatalf("the store holds %+v, %v; want a's hibernation snapshot", stored, err)
	}
	if list, err := e.eng.ListSnapshots(ctx, a); err != nil || len(list) != 0 {
		t.Errorf("a lists %+v, %v: the server's own snapshot", list, err)
	}
	r, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "x", EvalLastExpr: true})
	if err != nil || r.Result == nil || *r.Result != "'asleep'" || !r.Resumed {
		t.Fatalf("the first cell after hibernation: %+v, %v", r, err)
	}
	if stored, err := e.st.ListSnapshots(ctx); err != nil || len(stored) != 0 {
		t.Errorf("after the resume the store holds %+v, %v", stored, err)
	}
}

// TestSnapshotRefusals: a workspace holding a path no restore could write
// back is refused at the save (ErrSnapshotWorkspace, a 400), and the
// session is unharmed; a restore by a key at its cap of sessions is
// refused (ErrTooManySessions).
func TestSnapshotRefusals(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{Sessions: sessions.Config{MaxPerCaller: 1}}, Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a := Caller{Name: "a"}
	s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	deep := "import os\nd = '/'.join(['d'] * 64)\nos.makedirs(d)\nopen(d + '/f.txt', 'w').write('x')\nx = 1"
	if r, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: deep}); err != nil || r.Stderr != "" {
		t.Fatalf("making a deep file: %v %s", err, r.Stderr)
	}
	if _, err := e.eng.SnapshotSession(ctx, s.ID, a); !errors.Is(err, ErrSnapshotWorkspace) {
		t.Fatalf("a snapshot of a file 65 levels deep: %v, want ErrSnapshotWorkspace", err)
	}
	r, err := e.eng.ExecuteCell(ctx, s.ID, a, CellRequest{Code: "import shutil; shutil.rmtree('d'); x + 1", EvalLastExpr: true})
	if err != nil || r.Result == nil || *r.Result != "2" {
		t.Fatalf("the session after the refused snapshot: %v %+v", err, r)
	}
	saved, err := e.eng.SnapshotSession(ctx, s.ID, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.CreateSession(ctx, SessionRequest{Caller: a.Name, FromSnapshot: saved.ID}); !errors.Is(err, ErrTooManySessions) {
		t.Errorf("a restore by a key at its cap: %v, want ErrTooManySessions", err)
	}
}
