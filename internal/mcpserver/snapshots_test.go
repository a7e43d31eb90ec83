package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// snapshotFake is a Backend with snapshots: it answers with canned values
// and records the ids it was given.
type snapshotFake struct {
	*fakeBackend
	asked []string
}

var threadSkipped = []client.SkippedVariable{{Name: "t", Reason: "a thread: threads do not survive a snapshot"}}

func (f *snapshotFake) Snapshot(_ context.Context, id string) (*client.SnapshotSaved, error) {
	f.asked = append(f.asked, "snapshot "+id)
	return &client.SnapshotSaved{SnapshotID: "snap_1", Bytes: 4096, ExecutionCount: 2, Saved: []string{"df"}, Skipped: threadSkipped}, nil
}

func (f *snapshotFake) Fork(_ context.Context, id string) (*client.Session, error) {
	f.asked = append(f.asked, "fork "+id)
	return &client.Session{SessionID: "ses_2", ForkedFrom: id}, nil
}

func (f *snapshotFake) ListSnapshots(context.Context) ([]client.SnapshotInfo, error) {
	f.asked = append(f.asked, "list")
	return []client.SnapshotInfo{{SnapshotID: "snap_1", SessionID: "ses_1", Bytes: 4096, PythonVersion: "3.12", ExecutionCount: 2,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, nil
}

func (f *snapshotFake) DeleteSnapshot(_ context.Context, id string) error {
	f.asked = append(f.asked, "delete "+id)
	return nil
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

// TestSnapshotTools: each tool calls the backend with the ids it was given
// and returns, as text and as structured output matching its schema, what
// the backend answered.
func TestSnapshotTools(t *testing.T) {
	f := &snapshotFake{fakeBackend: newFake()}
	cs, _ := connect(t, f, Options{})
	for _, tc := range []struct {
		tool      string
		args      map[string]any
		asked     string
		textHas   []string
		structure map[string]any
	}{
		{"snapshot_session", map[string]any{"session_id": "ses_1"}, "snapshot ses_1",
			[]string{"snap_1", "skipped t: a thread"}, map[string]any{"snapshot_id": "snap_1", "bytes": 4096.0}},
		{"fork_session", map[string]any{"session_id": "ses_1"}, "fork ses_1",
			[]string{"session ses_2 forked from ses_1"}, map[string]any{"session_id": "ses_2", "forked_from": "ses_1"}},
		{"list_snapshots", map[string]any{}, "list", []string{"snap_1", "ses_1", "2026-01-02T03:04:05Z"}, nil},
		{"delete_snapshot", map[string]any{"snapshot_id": "snap_1"}, "delete snap_1", []string{"snapshot snap_1 deleted"},
			map[string]any{"deleted": true}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			f.asked = nil
			res, text := callText(t, cs, tc.tool, tc.args)
			if res.IsError || len(f.asked) != 1 || f.asked[0] != tc.asked {
				t.Fatalf("error %v %q; backend asked %q, want %q", res.IsError, text, f.asked, tc.asked)
			}
			for _, want := range tc.textHas {
				if !strings.Contains(text, want) {
					t.Errorf("text %q lacks %q", text, want)
				}
			}
			out, _ := res.StructuredContent.(map[string]any)
			for k, v := range tc.structure {
				if out[k] != v {
					t.Errorf("%s = %v, want %v (%v)", k, out[k], v, out)
				}
			}
		})
	}
}

// TestSnapshotToolsWithoutABackendForThem: a backend without snapshots
// answers each tool with an error saying so.
func TestSnapshotToolsWithoutABackendForThem(t *testing.T) {
	cs, _ := connect(t, newFake(), Options{})
	for _, name := range []string{"snapshot_session", "fork_session", "list_snapshots", "delete_snapshot"} {
		args := map[string]any{"session_id": "ses_1"}
		switch name {
		case "list_snapshots":
			args = map[string]any{}
		case "delete_snapshot":
			args = map[string]any{"snapshot_id": "snap_1"}
		}
		if res, text := callText(t, cs, name, args); !res.IsError || !strings.Contains(text, errNoSnapshots.Error()) {
			t.Errorf("%s: error %v, %q", name, res.IsError, text)
		}
	}
}
