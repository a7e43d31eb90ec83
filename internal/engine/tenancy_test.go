package engine

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/workspace"
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

// TestWorkspaceTenancy: another caller is told a workspace does not exist,
// exactly as for an unknown name, for every call, whether it names the
// workspace as its own or names its owner; each caller lists and keeps its
// own (two keys may each have a "data"); an admin reaches every caller's
// by naming the owner, and the audit trail says so.
func TestWorkspaceTenancy(t *testing.T) {
	ws, err := workspace.OpenLocal(workspace.Config{Dir: t.TempDir(), UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, Config{}, Deps{Runner: &runtest.Runner{}, Workspaces: ws, WorkspaceMounts: func() error { return nil }})
	ctx := context.Background()
	a, b := Caller{Name: "a"}, Caller{Name: "b"}
	admin := Caller{Name: "ops", Admin: true}
	if _, err := e.eng.CreateWorkspace(ctx, a, "data", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.WriteWorkspaceFile(ctx, a, WorkspaceRef{Name: "data"}, "secret.txt", strings.NewReader("a's"), 0o644, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.CreateWorkspace(ctx, a, "only-a", 0); err != nil {
		t.Fatal(err)
	}

	calls := func(who Caller, ref WorkspaceRef) map[string]error {
		_, get := e.eng.Workspace(ctx, who, ref)
		_, versions := e.eng.WorkspaceVersions(ctx, who, ref)
		_, restore := e.eng.RestoreWorkspace(ctx, who, ref, 0)
		_, files := e.eng.WorkspaceFiles(ctx, who, ref, WorkspaceHead, "")
		_, _, open := e.eng.OpenWorkspaceFile(ctx, who, ref, WorkspaceHead, "secret.txt")
		_, write := e.eng.WriteWorkspaceFile(ctx, who, ref, "x.txt", strings.NewReader("b"), 0o644, 1<<20)
		_, upload := e.eng.UploadWorkspace(ctx, who, ref, "", strings.NewReader(""), WorkspaceLimits{})
		_, remove := e.eng.RemoveWorkspaceFile(ctx, who, ref, "secret.txt")
		return map[string]error{"Workspace": get, "WorkspaceVersions": versions, "RestoreWorkspace": restore,
			"WorkspaceFiles": files, "OpenWorkspaceFile": open, "WriteWorkspaceFile": write, "UploadWorkspace": upload,
			"RemoveWorkspaceFile": remove, "TarWorkspace": e.eng.TarWorkspace(ctx, who, ref, WorkspaceHead, "", io.Discard),
			"DeleteWorkspace": e.eng.DeleteWorkspace(ctx, who, ref)}
	}
	_, unknownErr := e.eng.Workspace(ctx, b, WorkspaceRef{Name: "nosuch"})
	if !errors.Is(unknownErr, ErrWorkspaceNotFound) {
		t.Fatalf("an unknown workspace: %v", unknownErr)
	}
	for _, ref := range []WorkspaceRef{{Name: "only-a"}, {Owner: "a", Name: "only-a"}, {Owner: "a", Name: "data"}} {
		for call, err := range calls(b, ref) {
			want := strings.ReplaceAll(unknownErr.Error(), "nosuch", ref.Name)
			if !errors.Is(err, ErrWorkspaceNotFound) || err.Error() != want {
				t.Errorf("%s(b, %+v) = %v, want %q", call, ref, err, want)
			}
		}
	}
	for call, err := range calls(Caller{}, WorkspaceRef{Owner: "a", Name: "data"}) {
		if !errors.Is(err, ErrWorkspaceNotFound) {
			t.Errorf("%s by a caller without a name = %v, want not found", call, err)
		}
	}
	// b's own "data" is b's: empty, and a's is untouched by all of the above.
	if _, err := e.eng.CreateWorkspace(ctx, b, "data", 0); err != nil {
		t.Fatal(err)
	}
	if fs, err := e.eng.WorkspaceFiles(ctx, b, WorkspaceRef{Name: "data"}, WorkspaceHead, ""); err != nil || len(fs) != 0 {
		t.Fatalf("b's data holds %v, %v; want nothing", fs, err)
	}
	r, _, err := e.eng.OpenWorkspaceFile(ctx, a, WorkspaceRef{Name: "data"}, WorkspaceHead, "secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "a's" {
		t.Fatalf("a's file reads %q", got)
	}

	names := func(c Caller, all bool) []string {
		t.Helper()
		infos, err := e.eng.Workspaces(ctx, c, all)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range infos {
			out = append(out, w.Owner+"/"+w.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(b, false); !slices.Equal(got, []string{"b/data"}) {
		t.Errorf("b lists %v, want only its own", got)
	}
	if infos, err := e.eng.Workspaces(ctx, b, true); !errors.Is(err, ErrInvalid) || len(infos) != 0 {
		t.Errorf("b asking for every key's workspaces: %v %v, want ErrInvalid and nothing", infos, err)
	}
	if got := names(Caller{}, true); len(got) != 0 {
		t.Errorf("a caller without a name lists %v", got)
	}
	if got := names(admin, true); !slices.Equal(got, []string{"a/data", "a/only-a", "b/data"}) {
		t.Errorf("the admin lists %v, want all three", got)
	}
	if _, err := e.eng.Workspace(ctx, admin, WorkspaceRef{Owner: "a", Name: "data"}); err != nil {
		t.Fatalf("the admin's Workspace: %v", err)
	}
	var used, listed []actionRecord
	for _, r := range auditActions(t, e) {
		switch r.Action {
		case actionWorkspace:
			used = append(used, r)
		case actionListAllWs:
			listed = append(listed, r)
		}
	}
	if len(used) != 1 || used[0].Caller != "ops" || !used[0].Admin || used[0].Owner != "a" || used[0].Workspace != "data" {
		t.Errorf("workspace audit = %+v, want the admin's read of a's data only", used)
	}
	if len(listed) != 1 || listed[0].Caller != "ops" {
		t.Errorf("listing audit = %+v, want the admin's listing only", listed)
	}
}
