package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/runtest"
)

func TestTenancy(t *testing.T) {
	e := start(t, Config{})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	admin := Caller{Name: "ops", Admin: true}
	run := func(who Caller, s string) string {
		t.Helper()
		req := runtest.Script(s)
		req.Caller = who.Name
		x, err := e.eng.RunSync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return x.ID
	}
	done := run(a, "print:secret")
	run(b, "print:other")
	blocked, err := e.eng.Submit(ctx, func() Request { r := runtest.Script("block"); r.Caller = a.Name; return r }())
	if err != nil {
		t.Fatal(err)
	}

	// Another caller gets exactly what an unknown id gets.
	unknown := "exe_00000000-0000-7000-8000-000000000000"
	_, unknownErr := e.eng.Get(ctx, b, unknown)
	hidden := func(id string) map[string]error {
		_, get := e.eng.Get(ctx, b, id)
		_, kill := e.eng.Kill(ctx, b, id)
		_, follow := e.eng.Follow(ctx, b, id, 0)
		_, files := e.eng.ListFiles(ctx, b, id)
		_, _, open := e.eng.OpenFile(ctx, b, id, "out.txt")
		return map[string]error{"Get": get, "Kill": kill, "Follow": follow, "ListFiles": files, "OpenFile": open}
	}
	for _, id := range []string{done, blocked} {
		for call, err := range hidden(id) {
			want := unknownErr.Error()[:len(unknownErr.Error())-len(unknown)] + id
			if !errors.Is(err, ErrNotFound) || err.Error() != want {
				t.Errorf("%s(b, a's %s) = %v, want %q", call, id, err, want)
			}
		}
	}
	if x, err := e.eng.Get(ctx, a, blocked); err != nil || x.Status.Final() {
		t.Fatalf("after b's kill, a's execution is %+v, %v; want it still alive", x, err)
	}
	if _, err := e.eng.Get(ctx, Caller{}, done); !errors.Is(err, ErrNotFound) {
		t.Errorf("a caller without a name read an execution: %v", err)
	}

	ids := func(c Caller, all bool) []string {
		t.Helper()
		page, _, err := e.eng.List(ctx, ListOptions{Owner: c.Name, AllOwners: all})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range page {
			out = append(out, x.ID)
		}
		return out
	}
	if got := ids(b, false); len(got) != 1 || slices.Contains(got, done) || slices.Contains(got, blocked) {
		t.Errorf("b lists %v, want only its own execution", got)
	}
	if got := ids(a, false); len(got) != 2 {
		t.Errorf("a lists %v, want its 2 executions", got)
	}
	if got := ids(admin, true); len(got) != 3 {
		t.Errorf("admin lists %v, want all 3", got)
	}

	// The admin reads and kills a's work; the audit trail says who.
	if x, err := e.eng.Get(ctx, admin, done); err != nil || x.Stdout != "secret" {
		t.Fatalf("admin Get = %+v, %v", x, err)
	}
	if st, err := e.eng.Kill(ctx, admin, blocked); err != nil || st != StatusKilled {
		t.Fatalf("admin Kill = %s, %v; want killed", st, err)
	}
	if _, err := e.eng.Get(ctx, a, done); err != nil {
		t.Fatalf("owner Get: %v", err)
	}
	var kills, reads []actionRecord
	for _, r := range auditActions(t, e) {
		switch r.Action {
		case actionKill:
			kills = append(kills, r)
		case actionRead:
			reads = append(reads, r)
		}
	}
	if len(kills) != 1 || kills[0].Caller != "ops" || !kills[0].Admin || kills[0].Owner != "a" ||
		kills[0].ExecutionID != blocked || kills[0].Status != StatusKilled {
		t.Errorf("kill audit = %+v, want one kill of a's %s by admin ops", kills, blocked)
	}
	if len(reads) != 1 || reads[0].Caller != "ops" || reads[0].Owner != "a" || reads[0].ExecutionID != done {
		t.Errorf("read audit = %+v, want the admin's read of %s only", reads, done)
	}
}

// TestSessionTenancy: a caller is told another caller's session does not
// exist, exactly as for an unknown id, whatever it asks; each caller lists
// its own sessions and deletes its own; an admin lists and uses every
// caller's, and the audit trail says so.
func TestSessionTenancy(t *testing.T) {
	jails := runtest.Jails(t)
	e := startWith(t, Config{}, Deps{Runner: jails, Jails: jails})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	admin := Caller{Name: "ops", Admin: true}
	create := func(who Caller) string {
		t.Helper()
		s, err := e.eng.CreateSession(ctx, SessionRequest{Caller: who.Name, MemoryBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	create(a)
	create(a)
	ofB := create(b)

	unknown := "ses_00000000-0000-7000-8000-000000000000"
	_, unknownErr := e.eng.GetSession(ctx, unknown, a)
	want := unknownErr.Error()[:len(unknownErr.Error())-len(unknown)] + ofB
	_, get := e.eng.GetSession(ctx, ofB, a)
	_, cell := e.eng.ExecuteCell(ctx, ofB, a, CellRequest{Code: "1"})
	_, restart := e.eng.RestartSession(ctx, ofB, a)
	_, files := e.eng.ListSessionFiles(ctx, ofB, a)
	_, read := e.eng.ReadSessionFile(ctx, ofB, a, "f.txt")
	for call, err := range map[string]error{"GetSession": get, "ExecuteCell": cell, "RestartSession": restart,
		"ListSessionFiles": files, "ReadSessionFile": read,
		"InterruptSession": e.eng.InterruptSession(ctx, ofB, a),
		"PutSessionFile":   e.eng.PutSessionFile(ctx, ofB, a, "f.txt", []byte("x")),
		"DeleteSession":    e.eng.DeleteSession(ctx, ofB, a)} {
		if !errors.Is(err, ErrSessionNotFound) || err.Error() != want {
			t.Errorf("%s(a, b's session) = %v, want %q", call, err, want)
		}
	}
	if got := len(e.eng.ListSessions(ctx, a)); got != 2 {
		t.Errorf("caller a lists %d sessions, want 2", got)
	}
	if got := len(e.eng.ListSessions(ctx, Caller{})); got != 0 {
		t.Errorf("a caller without a name lists %d sessions", got)
	}
	if got := len(e.eng.ListSessions(ctx, admin)); got != 3 {
		t.Errorf("the admin lists %d sessions, want 3", got)
	}
	if _, err := e.eng.GetSession(ctx, ofB, admin); err != nil {
		t.Errorf("the admin's GetSession: %v", err)
	}
	if err := e.eng.DeleteSession(ctx, ofB, b); err != nil {
		t.Fatal(err)
	}
	var used, listed []actionRecord
	for _, r := range auditActions(t, e) {
		switch r.Action {
		case actionSession:
			used = append(used, r)
		case actionListAllSess:
			listed = append(listed, r)
		}
	}
	if len(used) != 1 || used[0].Caller != "ops" || !used[0].Admin || used[0].Owner != "b" || used[0].SessionID != ofB {
		t.Errorf("session audit = %+v, want the admin's use of b's %s only", used, ofB)
	}
	if len(listed) != 1 || listed[0].Caller != "ops" {
		t.Errorf("listing audit = %+v, want the admin's listing only", listed)
	}
}
