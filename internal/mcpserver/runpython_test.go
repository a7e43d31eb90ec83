package mcpserver

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// fakeBackend records what run_python asks for and plays back a scripted
// execution.
type fakeBackend struct {
	startErr      error          // ExecuteAsync fails with it
	events        []client.Event // Follow yields these...
	streamErr     error          // ...then this error, if set...
	hang          bool           // ...or blocks until its context ends
	final         *client.ExecutionResult
	pending       int // GetExecution answers "running" this many times first
	fakeArtifacts     // lint and files

	mu     sync.Mutex
	files  map[string]string
	meta   *client.Metadata
	gets   int
	killed chan string
}

func newFake() *fakeBackend { return &fakeBackend{killed: make(chan string, 1)} }

const fakeID = "exe_fake"

func (f *fakeBackend) ExecuteAsync(_ context.Context, tarData []byte, m *client.Metadata) (string, error) {
	if f.startErr != nil {
		return "", f.startErr
	}
	files := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(tarData))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	f.mu.Lock()
	f.files, f.meta = files, m
	f.mu.Unlock()
	return fakeID, nil
}

func (f *fakeBackend) Follow(ctx context.Context, _ string) iter.Seq2[client.Event, error] {
	return func(yield func(client.Event, error) bool) {
		for _, ev := range f.events {
			if !yield(ev, nil) {
				return
			}
		}
		switch {
		case f.streamErr != nil:
			yield(client.Event{}, f.streamErr)
		case f.hang:
			<-ctx.Done()
			yield(client.Event{}, ctx.Err())
		}
	}
}

func (f *fakeBackend) GetExecution(context.Context, string) (*client.ExecutionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.gets <= f.pending {
		return &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusRunning}, nil
	}
	return f.final, nil
}

func (f *fakeBackend) Kill(_ context.Context, id string) (client.ExecutionStatus, error) {
	f.killed <- id
	return client.StatusKilled, nil
}

// connect serves b in memory and returns a connected client session;
// progress messages go to the returned channel.
func connect(t *testing.T, b Backend, opts Options) (*mcp.ClientSession, <-chan string) {
	t.Helper()
	ctx := context.Background()
	progress := make(chan string, 100)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(b, opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Message
		},
	})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, progress
}

// text is the concatenated text content of a tool result.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func events(kinds ...string) []client.Event {
	var evs []client.Event
	for i := 0; i+1 < len(kinds); i += 2 {
		evs = append(evs, client.Event{Seq: uint64(len(evs) + 1), Type: client.EventType(kinds[i]), Data: kinds[i+1]})
	}
	return evs
}

func TestRunPythonResults(t *testing.T) {
	tests := []struct {
		name      string
		backend   func() *fakeBackend
		args      map[string]any
		wantError bool
		wantText  []string
		wantOut   *RunPythonOutput // structured content, if any
	}{
		{
			name: "success returns stdout as text and structured content",
			backend: func() *fakeBackend {
				f := newFake()
				f.events = events("status", "running", "stdout", "4\n", "status", "completed")
				f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted, Stdout: "4\n", DurationMs: 12}
				return f
			},
			args:     map[string]any{"code": "print(2 + 2)"},
			wantText: []string{"status: completed, exit code 0, 12 ms\n--- stdout ---\n4\n"},
			wantOut:  &RunPythonOutput{ExecutionID: fakeID, Status: "completed", Stdout: "4\n", DurationMs: 12},
		},
		{
			name: "an exception is an error result with the traceback",
			backend: func() *fakeBackend {
				f := newFake()
				f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted, ExitCode: 1,
					Stderr: "Traceback (most recent call last):\nNameError: name 'x' is not defined\n", ErrorType: "NameError",
					Error: "name 'x' is not defined", ErrorLine: 1}
				return f
			},
			args:      map[string]any{"code": "x"},
			wantError: true,
			wantText:  []string{"exit code 1", "error: NameError: name 'x' is not defined (line 1)", "--- stderr ---\nTraceback"},
			wantOut: &RunPythonOutput{ExecutionID: fakeID, Status: "completed", ExitCode: 1, ErrorType: "NameError",
				Error: "name 'x' is not defined", ErrorLine: 1, Stderr: "Traceback (most recent call last):\nNameError: name 'x' is not defined\n"},
		},
		{
			name: "a timeout is an error result that keeps partial output",
			backend: func() *fakeBackend {
				f := newFake()
				f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusFailed, ExitCode: 124, Stdout: "partial",
					Error: "execution timeout after 1s", Reason: client.ReasonTimeout, StdoutTruncated: true}
				return f
			},
			args:      map[string]any{"code": "while True: print('partial')"},
			wantError: true,
			wantText:  []string{"status: failed, exit code 124", "error: execution timeout after 1s", "--- stdout ---\npartial\n[stdout truncated"},
		},
		{
			name: "no output says so",
			backend: func() *fakeBackend {
				f := newFake()
				f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted}
				return f
			},
			args:     map[string]any{"code": "pass"},
			wantText: []string{"(no output)"},
		},
		{
			name: "a refused request is an error result with the server's message",
			backend: func() *fakeBackend {
				f := newFake()
				f.startErr = &client.APIError{StatusCode: 400, Message: `unsupported python_version "3.99"`}
				return f
			},
			args:      map[string]any{"code": "pass", "python_version": "3.99"},
			wantError: true,
			wantText:  []string{`starting the run: unsupported python_version "3.99" (HTTP 400)`},
		},
		{
			name:      "a malformed python_version is refused before anything runs",
			backend:   newFake,
			args:      map[string]any{"code": "pass", "python_version": "latest"},
			wantError: true,
			wantText:  []string{"python_version"},
		},
		{
			name:      "a file may not replace main.py",
			backend:   newFake,
			args:      map[string]any{"code": "pass", "files": []map[string]string{{"path": "main.py", "content": "x"}}},
			wantError: true,
			wantText:  []string{`"main.py" is given twice`},
		},
		{
			name:      "a file may not escape the working directory",
			backend:   newFake,
			args:      map[string]any{"code": "pass", "files": []map[string]string{{"path": "../etc/passwd", "content": "x"}}},
			wantError: true,
			wantText:  []string{"unsafe file name"},
		},
		{
			name:      "missing code is refused",
			backend:   newFake,
			args:      map[string]any{"stdin": "x"},
			wantError: true,
			wantText:  []string{"code"},
		},
		{
			name: "a broken event stream falls back to polling for the outcome",
			backend: func() *fakeBackend {
				f := newFake()
				f.streamErr = client.ErrStreamEnded
				f.pending = 2
				f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted, Stdout: "done\n"}
				return f
			},
			args:     map[string]any{"code": "print('done')"},
			wantText: []string{"--- stdout ---\ndone\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := connect(t, tt.backend(), Options{})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: tt.args})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			if res.IsError != tt.wantError {
				t.Errorf("isError = %v, want %v; text %q", res.IsError, tt.wantError, text(res))
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q does not contain %q", text(res), w)
				}
			}
			if tt.wantOut != nil {
				got := decodeStructured(t, res)
				if !reflect.DeepEqual(got, *tt.wantOut) {
					t.Errorf("structured content\n got %+v\nwant %+v", got, *tt.wantOut)
				}
			}
		})
	}
}

// decodeStructured reads a result's structured content as RunPythonOutput.
func decodeStructured(t *testing.T, res *mcp.CallToolResult) RunPythonOutput {
	t.Helper()
	var out RunPythonOutput
	raw, err := jsonRoundTrip(res.StructuredContent, &out)
	if err != nil {
		t.Fatalf("structured content %s: %v", raw, err)
	}
	return out
}

func TestRunPythonRequest(t *testing.T) {
	tests := []struct {
		name      string
		args      map[string]any
		wantFiles map[string]string
		wantMeta  client.Metadata
	}{
		{
			name:      "defaults: main.py, server limits, network off",
			args:      map[string]any{"code": "print(1)"},
			wantFiles: map[string]string{"main.py": "print(1)"},
			wantMeta:  client.Metadata{Entrypoint: "main.py", Config: &client.ExecutionConfig{NetworkDisabled: client.Bool(true)}},
		},
		{
			name: "every argument",
			args: map[string]any{"code": "import helper", "files": []map[string]string{{"path": "helper.py", "content": "X = 1"}, {"path": "data/in.txt", "content": "abc"}},
				"python_version": "3.11", "timeout_seconds": 7, "network": true, "stdin": "input"},
			wantFiles: map[string]string{"main.py": "import helper", "helper.py": "X = 1", "data/in.txt": "abc"},
			wantMeta: client.Metadata{Entrypoint: "main.py", DockerImage: "python:3.11", Stdin: "input",
				Config: &client.ExecutionConfig{TimeoutSeconds: 7, NetworkDisabled: client.Bool(false)}},
		},
		{
			name:      "an allow list asks for network",
			args:      map[string]any{"code": "print(1)", "network_allow": []string{"pypi.org:443"}},
			wantFiles: map[string]string{"main.py": "print(1)"},
			wantMeta: client.Metadata{Entrypoint: "main.py", Config: &client.ExecutionConfig{NetworkDisabled: client.Bool(false),
				Network: &client.NetworkConfig{Allow: []string{"pypi.org:443"}}}},
		},
		{
			name:      "secrets ask for network",
			args:      map[string]any{"code": "print(1)", "secrets": []string{"GITHUB_TOKEN", "LLM_KEY"}},
			wantFiles: map[string]string{"main.py": "print(1)"},
			wantMeta: client.Metadata{Entrypoint: "main.py", Config: &client.ExecutionConfig{NetworkDisabled: client.Bool(false),
				Secrets: []string{"GITHUB_TOKEN", "LLM_KEY"}}},
		},
		{
			name:      "a workspace, read-only",
			args:      map[string]any{"code": "print(1)", "workspace": "proj", "workspace_read_only": true},
			wantFiles: map[string]string{"main.py": "print(1)"},
			wantMeta: client.Metadata{Entrypoint: "main.py", Config: &client.ExecutionConfig{NetworkDisabled: client.Bool(true),
				Workspace: "proj", WorkspaceMode: "ro"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted}
			cs, _ := connect(t, f, Options{})
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: tt.args}); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.files) != len(tt.wantFiles) {
				t.Errorf("files %v, want %v", f.files, tt.wantFiles)
			}
			for name, content := range tt.wantFiles {
				if f.files[name] != content {
					t.Errorf("file %s = %q, want %q", name, f.files[name], content)
				}
			}
			got, want := *f.meta, tt.wantMeta
			if got.Entrypoint != want.Entrypoint || got.DockerImage != want.DockerImage || got.Stdin != want.Stdin ||
				got.Config.TimeoutSeconds != want.Config.TimeoutSeconds || *got.Config.NetworkDisabled != *want.Config.NetworkDisabled {
				t.Errorf("metadata %+v config %+v, want %+v config %+v", got, *got.Config, want, *want.Config)
			}
			if !reflect.DeepEqual(got.Config.Network, want.Config.Network) {
				t.Errorf("network %+v, want %+v", got.Config.Network, want.Config.Network)
			}
			if got.Config.Workspace != want.Config.Workspace || got.Config.WorkspaceMode != want.Config.WorkspaceMode {
				t.Errorf("workspace %q %q, want %q %q", got.Config.Workspace, got.Config.WorkspaceMode, want.Config.Workspace, want.Config.WorkspaceMode)
			}
			if !reflect.DeepEqual(got.Config.Secrets, want.Config.Secrets) {
				t.Errorf("secrets %v, want %v", got.Config.Secrets, want.Config.Secrets)
			}
		})
	}
}

func TestRunPythonProgress(t *testing.T) {
	big := strings.Repeat("é", maxProgressMessage) // 2 bytes each: split in two
	f := newFake()
	f.events = events("status", "running", "stdout", "step 1\n", "stderr", "warning\n", "stdout", big, "status", "completed")
	f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted, Stdout: "step 1\n" + big}
	cs, progress := connect(t, f, Options{})

	params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "..."}}
	params.SetProgressToken("tok")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < 6 {
		select {
		case m := <-progress:
			got = append(got, m)
		case <-timeout:
			t.Fatalf("progress messages %q, want 6", got)
		}
	}
	want := []string{"status: running", "step 1\n", "stderr: warning\n", big[:maxProgressMessage], big[maxProgressMessage:], "status: completed"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("progress[%d] = %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

func TestRunPythonWithoutProgressTokenSendsNone(t *testing.T) {
	f := newFake()
	f.events = events("stdout", "hi\n")
	f.final = &client.ExecutionResult{ExecutionID: fakeID, Status: client.StatusCompleted}
	cs, progress := connect(t, f, Options{})
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "print('hi')"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-progress:
		t.Fatalf("got progress %q without asking", m)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestRunPythonKillsTheRun(t *testing.T) {
	tests := []struct {
		name string
		stop func(cancelCall context.CancelFunc, done chan struct{})
	}{
		{"when the client cancels the call", func(cancelCall context.CancelFunc, _ chan struct{}) { cancelCall() }},
		{"when the server shuts down", func(_ context.CancelFunc, done chan struct{}) { close(done) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.events = events("status", "running")
			f.hang = true
			done := make(chan struct{})
			cs, progress := connect(t, f, Options{Done: done})

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			params := &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "while True: pass"}}
			params.SetProgressToken(1)
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, params)
				errc <- err
			}()
			<-progress // the run is under way
			tt.stop(cancel, done)
			select {
			case id := <-f.killed:
				if id != fakeID {
					t.Errorf("killed %q, want %q", id, fakeID)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the run was not killed")
			}
			<-errc
		})
	}
}

func TestListTools(t *testing.T) {
	cs, _ := connect(t, newFake(), Options{Preview: func() bool { return true }})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		listed[tool.Name] = tool
	}
	if defs := Definitions(); len(listed) != len(defs) {
		t.Fatalf("%d tools listed, %d definitions", len(listed), len(defs))
	}
	tests := []struct {
		name     string
		required []string
		props    []string
	}{
		{"run_python", []string{"code"}, []string{"code", "files", "python_version", "timeout_seconds", "network", "network_allow", "secrets", "stdin", "requirements", "session_id", "workspace", "workspace_read_only"}},
		{"lint_python", []string{"code"}, []string{"code", "files", "profile", "select", "ignore"}},
		{"list_files", []string{"execution_id"}, []string{"execution_id"}},
		{"read_file", []string{"execution_id", "path"}, []string{"execution_id", "path", "offset", "max_bytes"}},
		{"create_session", nil, []string{"python_version", "idle_timeout_seconds", "network", "network_allow", "secrets", "requirements", "workspace", "workspace_read_only", "from_snapshot"}},
		{"close_session", []string{"session_id"}, []string{"session_id"}},
		{"list_workspaces", nil, nil},
		{"list_workspace_files", []string{"workspace"}, []string{"workspace", "dir"}},
		{"read_workspace_file", []string{"workspace", "path"}, []string{"workspace", "path", "offset", "max_bytes"}},
		{"write_workspace_file", []string{"workspace", "path", "content"}, []string{"workspace", "path", "content"}},
		{"snapshot_session", []string{"session_id"}, []string{"session_id"}},
		{"fork_session", []string{"session_id"}, []string{"session_id"}},
		{"list_snapshots", nil, nil},
		{"delete_snapshot", []string{"snapshot_id"}, []string{"snapshot_id"}},
		{"preview_session_port", []string{"session_id", "port"}, []string{"session_id", "port", "revoke"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := listed[tt.name]
			if !ok {
				t.Fatalf("not listed; tools %v", slices.Collect(maps.Keys(listed)))
			}
			schema := tool.InputSchema.(map[string]any)
			var req []string
			required, _ := schema["required"].([]any)
			for _, r := range required {
				req = append(req, r.(string))
			}
			if !slices.Equal(req, tt.required) {
				t.Errorf("required %v, want %v", req, tt.required)
			}
			props, _ := schema["properties"].(map[string]any) // none for a tool without arguments
			for _, p := range tt.props {
				if _, ok := props[p]; !ok {
					t.Errorf("input schema lacks %s", p)
				}
			}
			if len(props) != len(tt.props) {
				t.Errorf("input schema has %d properties, want %d", len(props), len(tt.props))
			}
			if tool.OutputSchema == nil || tool.Description == "" {
				t.Error("no output schema or no description")
			}
		})
	}
}

func TestSplitText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"short", "abc", 4, []string{"abc"}},
		{"exact", "abcd", 4, []string{"abcd"}},
		{"long", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"never inside a rune", "aéé", 2, []string{"a", "é", "é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitText(tt.in, tt.max)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("splitText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

var errBoom = errors.New("boom")

func TestKillFailureIsReported(t *testing.T) {
	h := &handlers{backend: failingKill{}, log: Options{}.logger()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.kill(ctx, fakeID)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
		t.Fatalf("kill error %v, want both the cancellation and the kill failure", err)
	}
}

type failingKill struct{ Backend }

func (failingKill) Kill(context.Context, string) (client.ExecutionStatus, error) { return "", errBoom }
