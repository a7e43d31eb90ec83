package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/client"
)

// TestSnapshotsFromTheClientAndTheCLI, against a real server, as a user of
// the Go client and the built CLI would: snapshot a session (what it skips
// is named), fork it (the fork diverges), restore the snapshot into a new
// session, see a hibernated session resume, list and delete snapshots.
func TestSnapshotsFromTheClientAndTheCLI(t *testing.T) {
	needRoot(t)
	srv := startServer(t, t.TempDir(), "--session-hibernate-after", "3")
	ctx := context.Background()
	c := client.New(srv.url)
	run := func(args ...string) string {
		t.Helper()
		r := cli(t, srv.url, "", args...)
		if r.code != 0 {
			t.Fatalf("pyexec %v: exit %d\n%s%s\n%s", args, r.code, r.stdout, r.stderr, srv.logs)
		}
		return strings.TrimSpace(r.stdout)
	}
	cell := func(id, code string) *client.CellResult {
		t.Helper()
		r, err := c.ExecuteCell(ctx, id, &client.CellRequest{Code: code})
		if err != nil {
			t.Fatalf("cell %q: %v", code, err)
		}
		return r
	}
	value := func(r *client.CellResult) string {
		if r.Result == nil {
			return "<none> " + r.Stderr
		}
		return *r.Result
	}

	parent, err := c.CreateSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cell(parent.SessionID, "import threading\ndata = {'answer': 42}\nlock = threading.Lock()\nopen('notes.txt', 'w').write('kept')")

	r := cli(t, srv.url, "", "session", "snapshot", parent.SessionID)
	snap := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(snap, "snap_") || !strings.Contains(r.stderr, "skipped lock: ") {
		t.Fatalf("session snapshot: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	list, err := c.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].SnapshotID != snap || list[0].SessionID != parent.SessionID || list[0].ExecutionCount != 1 {
		t.Fatalf("ListSnapshots: %+v, %v", list, err)
	}

	child := run("session", "fork", parent.SessionID)
	if s, err := c.GetSession(ctx, child); err != nil || s.ForkedFrom != parent.SessionID {
		t.Errorf("the fork %s: %+v, %v", child, s, err)
	}
	cell(child, "data['answer'] = 0")
	if got := value(cell(parent.SessionID, "data['answer']")); got != "42" {
		t.Errorf("the parent after its fork changed: %s", got)
	}

	var restored client.Session
	if err := json.Unmarshal([]byte(run("session", "create", "--json", "--from-snapshot", snap)), &restored); err != nil ||
		restored.FromSnapshot != snap || restored.ExecutionCount != 1 {
		t.Fatalf("session create --from-snapshot: %+v, %v", restored, err)
	}
	if got := value(cell(restored.SessionID, "data, open('notes.txt').read(), 'lock' in globals()")); got != "({'answer': 42}, 'kept', False)" {
		t.Errorf("the restored session: %s", got)
	}

	eventually(t, 30*time.Second, "the restored session to hibernate", func() bool {
		s, err := c.GetSession(ctx, restored.SessionID)
		return err == nil && s.State == client.SessionHibernated
	})
	if r := cell(restored.SessionID, "data['answer']"); value(r) != "42" || !r.Resumed {
		t.Errorf("the first cell after hibernation: %s, resumed %v", value(r), r.Resumed)
	}
	if r := cell(restored.SessionID, "data['answer']"); r.Resumed {
		t.Error("the next cell says it resumed the session again")
	}

	if got := run("snapshot", "ls", "-q"); got != snap {
		t.Errorf("snapshot ls -q: %q, want %q", got, snap)
	}
	run("snapshot", "rm", snap)
	var apiErr *client.APIError
	if err := c.DeleteSnapshot(ctx, snap); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("deleting the deleted snapshot: %v, want 404", err)
	}
	if got := run("snapshot", "ls", "-q"); got != "" {
		t.Errorf("snapshot ls -q after rm: %q", got)
	}
}
