package mcpserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// previewFake is the fake backend with previews: it shares port 8000 of
// ses_a only, as the API would for the session's owner.
type previewFake struct {
	*fakeBackend
	revoked int
}

var errFakeNotFound = errors.New("session not found")

func (f *previewFake) ShareSessionPort(_ context.Context, id string, port int) (*client.PortShare, error) {
	if id != "ses_a" {
		return nil, errFakeNotFound
	}
	return &client.PortShare{URL: "https://preview.example/preview/tok/", SessionID: id, Port: port,
		ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Isolation: "preview_host"}, nil
}

func (f *previewFake) RevokeSessionPort(_ context.Context, id string, _ int) (int, error) {
	if id != "ses_a" {
		return 0, errFakeNotFound
	}
	f.revoked++
	return 2, nil
}

// TestPreviewToolFollowsAvailability: preview_session_port is offered
// only by a server told previews are on; the definitions agree.
func TestPreviewToolFollowsAvailability(t *testing.T) {
	for _, tc := range []struct {
		name    string
		preview func() bool
		want    bool
	}{
		{"unset", nil, false},
		{"off", func() bool { return false }, false},
		{"on", func() bool { return true }, true},
	} {
		cs, _ := connect(t, &previewFake{fakeBackend: newFake()}, Options{Preview: tc.preview})
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		offered := false
		for _, tool := range res.Tools {
			offered = offered || tool.Name == previewToolName
		}
		defs := AvailableDefinitions(true, tc.want)
		defined := false
		for _, d := range defs {
			defined = defined || d.Name == previewToolName
		}
		if offered != tc.want || defined != tc.want || len(res.Tools) != len(defs) {
			t.Errorf("%s: offered %v, defined %v, %d tools for %d definitions; want %v", tc.name, offered, defined,
				len(res.Tools), len(defs), tc.want)
		}
	}
}

func TestPreviewTool(t *testing.T) {
	f := &previewFake{fakeBackend: newFake()}
	cs, _ := connect(t, f, Options{Preview: func() bool { return true }})
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: previewToolName, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call(map[string]any{"session_id": "ses_a", "port": 8000})
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["url"] != "https://preview.example/preview/tok/" || out["expires_at"] != "2026-01-02T03:04:05Z" ||
		out["isolation"] != "preview_host" || !strings.Contains(text(res), "https://preview.example/preview/tok/") {
		t.Errorf("share: error %v, %v, %q", res.IsError, out, text(res))
	}
	res = call(map[string]any{"session_id": "ses_a", "port": 8000, "revoke": true})
	out, _ = res.StructuredContent.(map[string]any)
	if res.IsError || out["revoked"] != 2.0 || out["url"] != nil || f.revoked != 1 || !strings.Contains(text(res), "revoked 2 ") {
		t.Errorf("revoke: error %v, %v, %q, %d revokes", res.IsError, out, text(res), f.revoked)
	}
	for _, args := range []map[string]any{
		{"session_id": "ses_b", "port": 8000},
		{"session_id": "ses_b", "port": 8000, "revoke": true},
	} {
		if res := call(args); !res.IsError || !strings.Contains(text(res), "session not found") {
			t.Errorf("%v: error %v, %q", args, res.IsError, text(res))
		}
	}
	for _, port := range []any{0, 65536, "8000"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: previewToolName,
			Arguments: map[string]any{"session_id": "ses_a", "port": port}}); err == nil && !res.IsError {
			t.Errorf("port %v accepted: %q", port, text(res))
		}
	}
}

// TestPreviewToolWithoutBackend: a backend without previews answers the
// tool with an error, not a panic.
func TestPreviewToolWithoutBackend(t *testing.T) {
	cs, _ := connect(t, newFake(), Options{Preview: func() bool { return true }})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: previewToolName,
		Arguments: map[string]any{"session_id": "ses_a", "port": 8000}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), errNoPreviews.Error()) {
		t.Errorf("error %v, %q", res.IsError, text(res))
	}
}
