package mcpserver

import (
	"context"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// sessionRecorder is a backend whose create_session records the request
// the tool sends to the server's API.
type sessionRecorder struct {
	*fakeBackend
	got *client.SessionRequest
}

func (r *sessionRecorder) CreateSessionWithProgress(_ context.Context, req *client.SessionRequest, _ func(string)) (*client.Session, error) {
	r.got = req
	return &client.Session{SessionID: "ses_fake", State: "idle"}, nil
}
func (r *sessionRecorder) DeleteSession(context.Context, string) error { return nil }
func (r *sessionRecorder) ExecuteCell(context.Context, string, *client.CellRequest) (*client.CellResult, error) {
	return &client.CellResult{}, nil
}
func (r *sessionRecorder) UploadSessionFile(context.Context, string, string, []byte) error {
	return nil
}

// TestCreateSessionNetworkRequest: create_session's network, allow list
// and secrets reach the API's session create as its fields (network on,
// network.allow, secrets), and a session asking for none has network off.
func TestCreateSessionNetworkRequest(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any
		off     bool
		allow   []string
		secrets []string
	}{
		{"none", map[string]any{}, true, nil, nil},
		{"network", map[string]any{"network": true}, false, nil, nil},
		{"an allow list", map[string]any{"network_allow": []string{"allowed.test:443"}}, false, []string{"allowed.test:443"}, nil},
		{"secrets", map[string]any{"secrets": []string{"GITHUB_TOKEN"}}, false, nil, []string{"GITHUB_TOKEN"}},
		{"both", map[string]any{"network_allow": []string{"api.github.com"}, "secrets": []string{"GITHUB_TOKEN"}}, false,
			[]string{"api.github.com"}, []string{"GITHUB_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &sessionRecorder{fakeBackend: newFake()}
			cs, _ := connect(t, rec, Options{})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_session", Arguments: tt.args})
			if err != nil || res.IsError || rec.got == nil {
				t.Fatalf("create_session: %v %v, request %+v", err, res, rec.got)
			}
			got := rec.got
			if got.NetworkDisabled == nil || *got.NetworkDisabled != tt.off {
				t.Errorf("network_disabled %v, want %v", got.NetworkDisabled, tt.off)
			}
			var allow []string
			if got.Network != nil {
				allow = got.Network.Allow
			}
			if !reflect.DeepEqual(allow, tt.allow) || !reflect.DeepEqual(got.Secrets, tt.secrets) {
				t.Errorf("allow %v secrets %v, want %v %v", allow, got.Secrets, tt.allow, tt.secrets)
			}
		})
	}
}
