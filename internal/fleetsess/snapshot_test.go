package fleetsess

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestSnapshotAcrossTheFleet: a session held by node a is saved through
// node b, restored on node b from the fleet's store with its variables and
// files, and forked through node b on node a, where the fork diverges from
// its parent (a fork whose interpreter ends loading the state answers
// ErrSessionForkEnded through b as on a); another key is told neither the session nor the snapshot
// exists.
func TestSnapshotAcrossTheFleet(t *testing.T) {
	srv := fleetServer(t)
	a := startNode(t, srv, "a", 2)
	b := startNode(t, srv, "b", 2)
	ctx := context.Background()
	bob := engine.Caller{Name: "bob"}
	s := a.create(t)
	a.cell(t, s.ID, "x = 6 * 7\nopen('f.txt', 'w').write('from a')")

	if _, err := b.r.SnapshotSession(ctx, s.ID, bob); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Errorf("bob saves alice's session: %v", err)
	}
	saved, err := b.r.SnapshotSession(ctx, s.ID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.r.CreateSession(ctx, engine.SessionRequest{Caller: bob.Name, FromSnapshot: saved.ID}); !errors.Is(err, engine.ErrSnapshotNotFound) {
		t.Errorf("bob restores alice's snapshot: %v", err)
	}
	restored, err := b.r.CreateSession(ctx, engine.SessionRequest{Caller: alice.Name, FromSnapshot: saved.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.GetSession(ctx, restored.ID, alice); err != nil {
		t.Errorf("the restored session is not on node b: %v", err)
	}
	if r := a.cell(t, restored.ID, "x, open('f.txt').read()"); r.Result == nil || *r.Result != "(42, 'from a')" {
		t.Fatalf("the restored session, reached through a: %+v", r)
	}

	fork, err := b.r.ForkSession(ctx, s.ID, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.eng.GetSession(ctx, fork.ID, alice); err != nil {
		t.Errorf("the fork is not on its parent's node a: %v", err)
	}
	b.cell(t, fork.ID, "x = -1")
	if r := b.cell(t, s.ID, "x"); r.Result == nil || *r.Result != "42" {
		t.Errorf("the parent after its fork changed x: %+v", r.Result)
	}
	if r := b.cell(t, fork.ID, "x"); r.Result == nil || *r.Result != "-1" {
		t.Errorf("the fork: %+v", r.Result)
	}
	// A fork whose interpreter ends while loading the state answers
	// through b as on a (409 through the API), and the parent goes on.
	if err := b.r.DeleteSession(ctx, fork.ID, alice); err != nil {
		t.Fatal(err)
	}
	a.cell(t, s.ID, "import os\nclass Bomb:\n    def __reduce__(self):\n        return os._exit, (3,)\nbomb = Bomb()")
	if _, err := b.r.ForkSession(ctx, s.ID, alice); !errors.Is(err, engine.ErrSessionForkEnded) || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("a fork through b whose interpreter exits loading: %v, want ErrSessionForkEnded saying exit code 3", err)
	}
	if r := b.cell(t, s.ID, "del bomb\nx"); r.Result == nil || *r.Result != "42" {
		t.Errorf("the parent after its failed fork: %+v", r.Result)
	}
	list, err := a.r.ListSnapshots(ctx, alice)
	if err != nil || len(list) != 1 || list[0].ID != saved.ID {
		t.Errorf("alice's snapshots through a: %+v, %v", list, err)
	}
	if err := a.r.DeleteSnapshot(ctx, saved.ID, bob); !errors.Is(err, engine.ErrSnapshotNotFound) {
		t.Errorf("bob deletes alice's snapshot: %v", err)
	}
}
