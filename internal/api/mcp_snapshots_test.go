package api

import (
	"strings"
	"testing"
)

// TestMCPSnapshotTools, through /mcp over the real engine: an agent saves a
// session, forks it (the fork diverges), ends it, restores the snapshot
// into a new session holding its variables, lists and deletes it.
func TestMCPSnapshotTools(t *testing.T) {
	ts := tenancyServer(t)
	a := mcpAs(t, ts, keyA)
	call := func(name string, args map[string]any) (string, map[string]any) {
		t.Helper()
		failed, text, out := callTool(t, a, name, args)
		if failed {
			t.Fatalf("%s %v: %s", name, args, text)
		}
		return text, out
	}
	cell := func(ses, code string) string {
		t.Helper()
		text, _ := call("run_python", map[string]any{"session_id": ses, "code": code})
		return text
	}

	_, out := call("create_session", map[string]any{})
	ses, _ := out["session_id"].(string)
	cell(ses, "import threading\ndata = {'answer': 42}\nt = threading.Thread(target=lambda: None)\nopen('notes.txt', 'w').write('kept')")

	text, out := call("snapshot_session", map[string]any{"session_id": ses})
	snap, _ := out["snapshot_id"].(string)
	if !strings.HasPrefix(snap, "snap_") || !strings.Contains(text, "skipped t: ") {
		t.Fatalf("snapshot_session: %s %v", text, out)
	}

	_, out = call("fork_session", map[string]any{"session_id": ses})
	child, _ := out["session_id"].(string)
	if child == "" || out["forked_from"] != ses {
		t.Fatalf("fork_session: %v", out)
	}
	cell(child, "data['answer'] = 0")
	if got := cell(ses, "data['answer']"); !strings.Contains(got, "value: 42") {
		t.Errorf("the parent after its fork changed: %s", got)
	}
	if got := cell(child, "data['answer']"); !strings.Contains(got, "value: 0") {
		t.Errorf("the fork: %s", got)
	}

	call("close_session", map[string]any{"session_id": ses})
	_, out = call("create_session", map[string]any{"from_snapshot": snap})
	restored, _ := out["session_id"].(string)
	if got := cell(restored, "data['answer'], open('notes.txt').read(), 't' in globals()"); !strings.Contains(got, "value: (42, 'kept', False)") {
		t.Errorf("the restored session: %s", got)
	}

	if text, out := call("list_snapshots", map[string]any{}); !strings.Contains(text, snap) || len(out["snapshots"].([]any)) != 1 {
		t.Errorf("list_snapshots: %s %v", text, out)
	}
	call("delete_snapshot", map[string]any{"snapshot_id": snap})
	if text, _ := call("list_snapshots", map[string]any{}); strings.Contains(text, snap) {
		t.Errorf("list_snapshots after delete_snapshot: %s", text)
	}
	if failed, text, _ := callTool(t, a, "create_session", map[string]any{"from_snapshot": snap}); !failed || !strings.Contains(text, "not found") {
		t.Errorf("restoring a deleted snapshot: failed=%v %s", failed, text)
	}
}
